package coordinator_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
)

// BenchmarkResume is the cost of resuming a run whose trace holds 100,
// 1,000 and 10,000 committed steps: Cluster.Resume takes the lease, reads
// and folds the trace, opens the workspace and assembles the next request
// (ms-ready, the median, and ready/bare, its ratio to a bare read of the
// same records in the same iteration), then has a worker answer that step
// (whose request carries the whole transcript) and commits it, which
// finishes the run (ns/op). Beside it, bare reads the same records with an
// ordered consumer and nothing else, in the same cluster. The traces are
// synthesized outside the timer with trace.Writer: a small read per step,
// as an agent exploring a workspace leaves.
//
//	go test -run '^$' -bench BenchmarkResume -benchtime 20x ./pkg/coordinator
func BenchmarkResume(b *testing.B) {
	ws := b.TempDir()
	finish := provider.NewScriptedFunc(func(*protocol.CompletionRequest, int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: "Done.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	})
	cl := clustertest.Start(b, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: finish, NoTakeover: true})
	nc := testkit.Conn(b, cl.Server(), nats.UserInfo(cl.Credentials()))
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	assets, err := wire.Ensure(b.Context(), js, wire.Config{})
	if err != nil {
		b.Fatal(err)
	}
	tr := trace.New(js, assets.Trace)
	runs := 0
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("steps=%d/resume", n), func(b *testing.B) {
			var ready, bare []time.Duration
			for b.Loop() {
				b.StopTimer()
				runs++
				run := fmt.Sprintf("bench-%d-%d", n, runs)
				synthesize(b, tr, run, ws, n)
				t0 := time.Now()
				if got := testkit.OrderedRead(b, assets.Trace, trace.Subject(run)); got != n+1 {
					b.Fatalf("read %d records, want %d", got, n+1)
				}
				bare = append(bare, time.Since(t0))
				assembled := make(chan time.Time, 1)
				sub, err := nc.Subscribe(wire.Event(run, protocol.EventAssembled), func(*nats.Msg) {
					select {
					case assembled <- time.Now():
					default:
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 = time.Now()
				res, err := cl.Run(run).Resume(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if res.Outcome != protocol.OutcomeFinished || res.Steps != n+1 {
					b.Fatalf("resumed run = %s after %d steps (%s), want finished after %d", res.Outcome, res.Steps, res.Reason, n+1)
				}
				select {
				case at := <-assembled:
					ready = append(ready, at.Sub(t0))
				case <-time.After(10 * time.Second):
					b.Fatalf("run %s finished and its assembled event was not heard in 10 s", run)
				}
				_ = sub.Unsubscribe()
				b.StartTimer()
			}
			// ready is the resume itself: the lease taken, the trace read
			// and folded, the workspace open and the next request
			// assembled; ns/op runs on to the end of that step and of the
			// run. Both beside a bare read of the same records in the
			// same iteration.
			slices.Sort(ready)
			slices.Sort(bare)
			r, bb := ready[len(ready)/2], bare[len(bare)/2]
			b.ReportMetric(float64(r.Microseconds())/1000, "ms-ready")
			b.ReportMetric(float64(bb.Microseconds())/1000, "ms-bare")
			b.ReportMetric(float64(r)/float64(bb), "ready/bare")
		})
		b.Run(fmt.Sprintf("steps=%d/bare", n), func(b *testing.B) {
			b.StopTimer()
			runs++
			run := fmt.Sprintf("bench-%d-%d", n, runs)
			synthesize(b, tr, run, ws, n)
			b.StartTimer()
			for b.Loop() {
				if got := testkit.OrderedRead(b, assets.Trace, trace.Subject(run)); got != n+1 {
					b.Fatalf("read %d records, want %d", got, n+1)
				}
			}
		})
	}
}

// synthesize appends a run of n committed steps to the trace: the started
// record, then one step per record, each reading a file.
func synthesize(b testing.TB, tr *trace.Trace, run, ws string, n int) {
	b.Helper()
	ctx := b.Context()
	w := tr.Writer(run, 0)
	c := &protocol.Contract{Schema: protocol.ContractSchema, Task: "Explore the workspace.", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Budget: protocol.Budget{MaxSteps: n + 10},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}}}
	raw, err := json.Marshal(c)
	if err != nil {
		b.Fatal(err)
	}
	if c, err = protocol.DecodeContract(raw); err != nil { // the defaults a submitted contract gets
		b.Fatal(err)
	}
	if err := w.Append(ctx, &protocol.Record{Kind: protocol.RecordStarted, Contract: c, Coordinator: "bench", Time: time.Now().UTC()}); err != nil {
		b.Fatal(err)
	}
	var tokens int64
	for i := 1; i <= n; i++ {
		args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("src/file%d.go", i)})
		turn := &protocol.Turn{Text: "Reading the next file.", Usage: protocol.Usage{InputTokens: 400, OutputTokens: 20},
			ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "read_file", Arguments: args}}}
		tokens += turn.Usage.Total()
		rec := &protocol.Record{Kind: protocol.RecordStep, Step: i, Turn: turn, Tokens: tokens,
			Observations: []protocol.Observation{{CallID: turn.ToolCalls[0].ID, Tool: "read_file",
				Content: fmt.Sprintf("package src\n\n// File %d does one small thing.\nfunc F%d() int { return %d }\n", i, i, i)}}}
		if err := w.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}
