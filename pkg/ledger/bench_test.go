package ledger_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/pkg/ledger"
)

// The benchmarks run against a real redis-server started for each one,
// and compare the ledger's draws with the floor: a Lua script that only
// returns 1, run with EVALSHA through the same client. Run them together:
//
//	go test -run '^$' -bench . -benchtime 2s ./pkg/ledger
//
// clients=16 runs 16 goroutines (b.SetParallelism(16/GOMAXPROCS)) on one
// client with a pool of 32 connections. Metrics: calls/s or pairs/s (one
// reserve and one settle, or one SettleAndReserve), and per-call latency
// percentiles in µs. On a machine shared with other work the separate
// benchmarks see different loads; BenchmarkVersusFloor interleaves the
// floor and the draws and reports the ratios the targets are set in.

const benchClients = 16

func benchClient(b *testing.B) *redis.Client {
	s := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 2 * benchClients})
	b.Cleanup(func() { c.Close() })
	return c
}

func parallelism() int {
	p := runtime.GOMAXPROCS(0)
	return (benchClients + p - 1) / p
}

// latencies collects per-call durations from many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, name string) {
	if len(l.all) == 0 {
		return
	}
	slices.Sort(l.all)
	at := func(q float64) float64 {
		return float64(l.all[min(len(l.all)-1, int(q*float64(len(l.all))))]) / float64(time.Microsecond)
	}
	b.ReportMetric(at(0.50), name+"-p50-us")
	b.ReportMetric(at(0.99), name+"-p99-us")
}

func rate(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRedisFloor is the floor: EVALSHA of `return 1`.
func BenchmarkRedisFloor(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	floor := redis.NewScript("return 1")
	keys := []string{"floor:{bench}"}
	if err := floor.Run(ctx, c, keys).Err(); err != nil {
		b.Fatal(err)
	}
	b.Run("clients=1", func(b *testing.B) {
		lat := &latencies{all: make([]time.Duration, 0, b.N)}
		for range b.N {
			t0 := time.Now()
			if err := floor.Run(ctx, c, keys).Err(); err != nil {
				b.Fatal(err)
			}
			lat.all = append(lat.all, time.Since(t0))
		}
		rate(b, "calls/s")
		lat.report(b, "call")
	})
	b.Run(fmt.Sprintf("clients=%d", benchClients), func(b *testing.B) {
		lat := &latencies{}
		b.SetParallelism(parallelism())
		b.RunParallel(func(pb *testing.PB) {
			var mine []time.Duration
			for pb.Next() {
				t0 := time.Now()
				if err := floor.Run(ctx, c, keys).Err(); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			lat.add(mine)
		})
		rate(b, "calls/s")
		lat.report(b, "call")
	})
}

// benchTree opens a tree with large ceilings in every dimension, so every
// check runs and none refuses.
func benchTree(b *testing.B, l ledger.Ledger) string {
	tree := fmt.Sprintf("bench.%d", time.Now().UnixNano())
	big := int64(1) << 49
	c := ledger.Ceiling{Limits: ledger.Limits{InputTokens: big, OutputTokens: big, Tokens: big, CostMicros: big, Steps: big}, Wall: 24 * time.Hour}
	if err := l.Open(context.Background(), tree, c); err != nil {
		b.Fatal(err)
	}
	return tree
}

var (
	benchEstimate = ledger.Usage{InputTokens: 2000, OutputTokens: 4096, CostMicros: 70_000, Steps: 1}
	benchActual   = ledger.Usage{InputTokens: 2000, OutputTokens: 731, CostMicros: 17_000, Steps: 1}
	benchCap      = ledger.Limits{Tokens: 1 << 48, CostMicros: 1 << 48, Steps: 1 << 48}
	agentSeq      atomic.Int64
)

// drawer is one benchmark client: an agent of its own, registered.
type drawer struct {
	l     ledger.Ledger
	tree  string
	agent string
	n     int
}

func newDrawer(b *testing.B, l ledger.Ledger, tree string) *drawer {
	d := &drawer{l: l, tree: tree, agent: fmt.Sprintf("a%d", agentSeq.Add(1))}
	if err := l.Register(context.Background(), tree, d.agent, 1); err != nil {
		b.Fatal(err)
	}
	return d
}

func (d *drawer) next() ledger.Reservation {
	d.n++
	return ledger.Reservation{Tree: d.tree, Agent: d.agent, Key: fmt.Sprintf("%s.%d.0", d.agent, d.n), Estimate: benchEstimate, Cap: benchCap}
}

// pairs runs reserve-then-settle pairs, timing each call.
func (d *drawer) pair(ctx context.Context, res, set *[]time.Duration) error {
	r := d.next()
	t0 := time.Now()
	if _, err := d.l.Reserve(ctx, r); err != nil {
		return err
	}
	t1 := time.Now()
	if _, err := d.l.Settle(ctx, d.tree, r.Key, benchActual); err != nil {
		return err
	}
	*res = append(*res, t1.Sub(t0))
	*set = append(*set, time.Since(t1))
	return nil
}

func benchReserveSettle(b *testing.B, l ledger.Ledger) {
	ctx := context.Background()
	tree := benchTree(b, l)
	b.Run("clients=1", func(b *testing.B) {
		d := newDrawer(b, l, tree)
		res := &latencies{all: make([]time.Duration, 0, b.N)}
		set := &latencies{all: make([]time.Duration, 0, b.N)}
		for range b.N {
			if err := d.pair(ctx, &res.all, &set.all); err != nil {
				b.Fatal(err)
			}
		}
		rate(b, "pairs/s")
		res.report(b, "reserve")
		set.report(b, "settle")
	})
	b.Run(fmt.Sprintf("clients=%d", benchClients), func(b *testing.B) {
		res, set := &latencies{}, &latencies{}
		b.SetParallelism(parallelism())
		b.RunParallel(func(pb *testing.PB) {
			d := newDrawer(b, l, tree)
			var r, s []time.Duration
			for pb.Next() {
				if err := d.pair(ctx, &r, &s); err != nil {
					b.Error(err)
					return
				}
			}
			res.add(r)
			set.add(s)
		})
		rate(b, "pairs/s")
		res.report(b, "reserve")
		set.report(b, "settle")
	})
}

// chain runs SettleAndReserve, each settling the previous step and
// reserving the next: one call per pair.
func benchSettleAndReserve(b *testing.B, l ledger.Ledger) {
	ctx := context.Background()
	tree := benchTree(b, l)
	run := func(b *testing.B, d *drawer, n func() bool, lat *[]time.Duration) {
		prev := d.next()
		if _, err := l.Reserve(ctx, prev); err != nil {
			b.Error(err)
			return
		}
		for n() {
			r := d.next()
			t0 := time.Now()
			if _, _, err := l.SettleAndReserve(ctx, prev.Key, benchActual, r); err != nil {
				b.Error(err)
				return
			}
			*lat = append(*lat, time.Since(t0))
			prev = r
		}
	}
	b.Run("clients=1", func(b *testing.B) {
		lat := &latencies{all: make([]time.Duration, 0, b.N)}
		i := 0
		run(b, newDrawer(b, l, tree), func() bool { i++; return i <= b.N }, &lat.all)
		rate(b, "pairs/s")
		lat.report(b, "draw")
	})
	b.Run(fmt.Sprintf("clients=%d", benchClients), func(b *testing.B) {
		lat := &latencies{}
		b.SetParallelism(parallelism())
		b.RunParallel(func(pb *testing.PB) {
			var mine []time.Duration
			run(b, newDrawer(b, l, tree), pb.Next, &mine)
			lat.add(mine)
		})
		rate(b, "pairs/s")
		lat.report(b, "draw")
	})
}

// BenchmarkReserveSettle: a Reserve then a Settle, two script calls per
// pair, against Redis.
func BenchmarkReserveSettle(b *testing.B) {
	benchReserveSettle(b, newRedis(b, benchClient(b), ledger.RedisConfig{}))
}

// BenchmarkSettleAndReserve: one script call per pair, against Redis.
func BenchmarkSettleAndReserve(b *testing.B) {
	benchSettleAndReserve(b, newRedis(b, benchClient(b), ledger.RedisConfig{}))
}

// BenchmarkMemoryReserveSettle is the embedded ledger, for comparison.
func BenchmarkMemoryReserveSettle(b *testing.B) {
	benchReserveSettle(b, ledger.NewMemory())
}

// BenchmarkVersusFloor measures the ledger against the floor under the same
// load, which matters on a machine shared with other work: the latency
// part alternates a floor call, a Reserve, a Settle and a SettleAndReserve
// in every iteration; the throughput parts alternate 50 ms phases of floor
// calls and of pairs across 16 goroutines. Ratios: draw-p50 over floor-p50
// (target ≤ 1.5), pairs/s over floor calls/s (target ≥ 0.45).
func BenchmarkVersusFloor(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	floor := redis.NewScript("return 1")
	keys := []string{"floor:{bench}"}
	if err := floor.Run(ctx, c, keys).Err(); err != nil {
		b.Fatal(err)
	}
	l := newRedis(b, c, ledger.RedisConfig{})
	tree := benchTree(b, l)

	b.Run("latency", func(b *testing.B) {
		d, chain := newDrawer(b, l, tree), newDrawer(b, l, tree)
		var fl, res, set, sar []time.Duration
		prev := chain.next()
		if _, err := l.Reserve(ctx, prev); err != nil {
			b.Fatal(err)
		}
		for range b.N {
			t0 := time.Now()
			if err := floor.Run(ctx, c, keys).Err(); err != nil {
				b.Fatal(err)
			}
			fl = append(fl, time.Since(t0))
			if err := d.pair(ctx, &res, &set); err != nil {
				b.Fatal(err)
			}
			r := chain.next()
			t0 = time.Now()
			if _, _, err := l.SettleAndReserve(ctx, prev.Key, benchActual, r); err != nil {
				b.Fatal(err)
			}
			sar = append(sar, time.Since(t0))
			prev = r
		}
		p50 := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2]) }
		for _, m := range []struct {
			name string
			d    []time.Duration
		}{{"floor", fl}, {"reserve", res}, {"settle", set}, {"sar", sar}} {
			(&latencies{all: m.d}).report(b, m.name)
		}
		b.ReportMetric(p50(res)/p50(fl), "reserve/floor")
		b.ReportMetric(p50(sar)/p50(fl), "sar/floor")
		b.ReportMetric(0, "ns/op")
	})

	phased := func(b *testing.B, pair func(d *drawer, held *ledger.Reservation) error) {
		var (
			phase          atomic.Int32 // 0 floor, 1 pairs
			counts         [2]atomic.Int64
			spent          [2]time.Duration
			stop           = make(chan struct{})
			switcher       sync.WaitGroup
			switchInterval = 50 * time.Millisecond
		)
		switcher.Go(func() {
			t := time.NewTicker(switchInterval)
			defer t.Stop()
			last := time.Now()
			for {
				select {
				case <-stop:
					spent[phase.Load()] += time.Since(last)
					return
				case now := <-t.C:
					p := phase.Load()
					spent[p] += now.Sub(last)
					last = now
					phase.Store(1 - p)
				}
			}
		})
		b.SetParallelism(parallelism())
		b.RunParallel(func(pb *testing.PB) {
			d := newDrawer(b, l, tree)
			var held ledger.Reservation
			for pb.Next() {
				p := phase.Load()
				if p == 0 {
					if err := floor.Run(ctx, c, keys).Err(); err != nil {
						b.Error(err)
						return
					}
				} else if err := pair(d, &held); err != nil {
					b.Error(err)
					return
				}
				counts[p].Add(1)
			}
		})
		close(stop)
		switcher.Wait()
		if spent[0] == 0 || spent[1] == 0 {
			b.ReportMetric(0, "ns/op")
			return // too short to have both phases
		}
		floorRate := float64(counts[0].Load()) / spent[0].Seconds()
		pairRate := float64(counts[1].Load()) / spent[1].Seconds()
		b.ReportMetric(floorRate, "floor-calls/s")
		b.ReportMetric(pairRate, "pairs/s")
		b.ReportMetric(pairRate/floorRate, "pairs/floor")
		b.ReportMetric(0, "ns/op")
	}
	b.Run(fmt.Sprintf("clients=%d/reserve-settle", benchClients), func(b *testing.B) {
		phased(b, func(d *drawer, _ *ledger.Reservation) error {
			var r, s []time.Duration
			return d.pair(ctx, &r, &s)
		})
	})
	b.Run(fmt.Sprintf("clients=%d/settle-and-reserve", benchClients), func(b *testing.B) {
		phased(b, func(d *drawer, held *ledger.Reservation) error {
			next := d.next()
			if held.Key == "" {
				*held = next
				_, err := l.Reserve(ctx, next)
				return err
			}
			_, _, err := l.SettleAndReserve(ctx, held.Key, benchActual, next)
			*held = next
			return err
		})
	})
}
