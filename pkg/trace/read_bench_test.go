package trace_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// BenchmarkRead reads a run of 1,000 steps, each a small read as an agent
// exploring a workspace leaves it, beside a bare ordered read of the same
// records in the same iteration, which delivers them and decodes nothing.
func BenchmarkRead(b *testing.B) {
	ctx := b.Context()
	js, err := jetstream.New(testkit.Conn(b, testkit.NATS(b)))
	if err != nil {
		b.Fatal(err)
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: trace.StreamName, Subjects: []string{trace.SubjectPrefix + ">"}})
	if err != nil {
		b.Fatal(err)
	}
	tr := trace.New(js, st)
	const run, n = "long", 1000
	w := tr.Writer(run, 0)
	if err := w.Append(ctx, &protocol.Record{Kind: protocol.RecordStarted, Contract: &protocol.Contract{Task: "Explore."}}); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("src/file%d.go", i)})
		turn := &protocol.Turn{Text: "Reading the next file.", Usage: protocol.Usage{InputTokens: 400, OutputTokens: 20},
			ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "read_file", Arguments: args}}}
		rec := &protocol.Record{Kind: protocol.RecordStep, Step: i, Turn: turn, Tokens: int64(420 * i),
			Observations: []protocol.Observation{{CallID: turn.ToolCalls[0].ID, Tool: "read_file",
				Content: fmt.Sprintf("package src\n\n// File %d does one small thing.\nfunc F%d() int { return %d }\n", i, i, i)}}}
		if err := w.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	var read, bare []time.Duration
	for b.Loop() {
		t0 := time.Now()
		recs, _, err := tr.Read(ctx, run)
		if err != nil || len(recs) != n+1 {
			b.Fatalf("read %d records, %v; want %d", len(recs), err, n+1)
		}
		read = append(read, time.Since(t0))
		t0 = time.Now()
		if got := testkit.OrderedRead(b, st, trace.Subject(run)); got != n+1 {
			b.Fatalf("bare read %d records, want %d", got, n+1)
		}
		bare = append(bare, time.Since(t0))
	}
	slices.Sort(read)
	slices.Sort(bare)
	r, bb := read[len(read)/2], bare[len(bare)/2]
	b.ReportMetric(float64(r.Microseconds())/1000, "ms-read")
	b.ReportMetric(float64(bb.Microseconds())/1000, "ms-bare")
	b.ReportMetric(float64(r)/float64(bb), "read/bare")
}
