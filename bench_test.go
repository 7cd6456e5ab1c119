package harness_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/bench"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// BenchmarkStep measures the harness's own overhead per step on the
// embedded default with the trace synced to disk: a run of b.N steps with a
// scripted provider that answers at once and a trivial tool, beside a bare
// JetStream publish-with-ack on the same server. ns/op is the whole
// measurement over b.N; read step-p50-ns and the ratio.
func BenchmarkStep(b *testing.B) {
	rep, err := bench.Run(b.Context(), bench.Config{Dir: b.TempDir(), Steps: max(b.N, 10), Publishes: 1000, LatencyOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rep.StepP50.Nanoseconds()), "step-p50-ns")
	b.ReportMetric(float64(rep.StepP99.Nanoseconds()), "step-p99-ns")
	b.ReportMetric(float64(rep.PublishP50.Nanoseconds()), "publish-p50-ns")
	b.ReportMetric(rep.Ratio(), "step/publish")
	b.ReportMetric(float64(rep.PathP50.Nanoseconds()), "path-p50-ns")
	b.ReportMetric(float64(rep.StepP50)/float64(rep.PathP50), "step/path")
}

// BenchmarkThroughput measures steps per second from one coordinator
// across 16 concurrent runs.
func BenchmarkThroughput(b *testing.B) {
	rep, err := bench.Run(b.Context(), bench.Config{Dir: b.TempDir(), Steps: max(b.N/16, 10), Runs: 16, Publishes: 200})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rep.StepsPerSecond, "steps/s")
	b.ReportMetric(rep.PathPerSecond, "path-steps/s")
}

// BenchmarkBurst submits contracts through one Client on the embedded
// default (trace synced), one at a time (runs=1) and 100 at once
// (runs=100), and measures, for each run, submission to its first request
// assembled (the assembled event, heard outside the coordinator), beside a
// bare NATS request and reply on the same server in the same iteration.
// Each run is one step; ns/op is the whole burst, the runs finished.
func BenchmarkBurst(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) { benchBurst(b, n) })
	}
}

// benchBurst submits burst one-step contracts at once, every iteration,
// and reports the percentiles of the time from the burst's start to each
// run's first request.
func benchBurst(b *testing.B, burst int) {
	ws := b.TempDir()
	agent := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl := clustertest.Start(b, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: agent, MaxRuns: 2 * burst})
	nc := testkit.Conn(b, cl.Server(), nats.UserInfo(cl.Credentials()))
	var mu sync.Mutex
	first := map[string]time.Time{}
	if _, err := nc.Subscribe(wire.Event("*", protocol.EventAssembled), func(m *nats.Msg) {
		var ev protocol.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			mu.Lock()
			if _, ok := first[ev.Run]; !ok {
				first[ev.Run] = time.Now()
			}
			mu.Unlock()
		}
	}); err != nil {
		b.Fatal(err)
	}
	echo := "bench.echo." + nats.NewInbox()
	if _, err := nc.Subscribe(echo, func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Finish.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: 3},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
	var lat, bare []time.Duration
	round := 0
	for b.Loop() {
		round++
		for range 20 {
			t0 := time.Now()
			if _, err := nc.Request(echo, []byte("ping"), 10*time.Second); err != nil {
				b.Fatal(err)
			}
			bare = append(bare, time.Since(t0))
		}
		t0 := time.Now()
		hs := make([]*harness.RunHandle, burst)
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				h, err := cl.Submit(b.Context(), c, harness.WithRunID(fmt.Sprintf("burst-%d-%d", round, i)))
				if err != nil {
					b.Error(err)
					return
				}
				hs[i] = h
			})
		}
		wg.Wait()
		for _, h := range hs {
			if h == nil {
				b.FailNow()
			}
			if res, err := h.Wait(b.Context()); err != nil || res.Outcome != protocol.OutcomeFinished {
				b.Fatalf("run = %v, %v; want finished", res, err)
			}
		}
		mu.Lock()
		for i := range burst {
			at, ok := first[fmt.Sprintf("burst-%d-%d", round, i)]
			if !ok {
				mu.Unlock()
				b.Fatalf("run %d of the burst finished with no assembled event heard", i)
			}
			lat = append(lat, at.Sub(t0))
		}
		mu.Unlock()
	}
	slices.Sort(lat)
	slices.Sort(bare)
	p50, p99, floor := lat[len(lat)/2], lat[len(lat)*99/100], bare[len(bare)/2]
	b.ReportMetric(float64(p50.Microseconds())/1000, "first-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "first-p99-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000, "bare-rtt-ms")
	b.ReportMetric(float64(p99)/float64(floor), "p99/rtt")
}
