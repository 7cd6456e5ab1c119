package coordinator

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// BenchmarkRebuild folds a trace of n committed steps into a run's state,
// as a resume does before it goes on: each step reads another file, so
// none changes the workspace and the stall window holds every one of them.
// The cost per step stays the same as n grows.
func BenchmarkRebuild(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		recs := []protocol.Record{{Kind: protocol.RecordStarted, Contract: &protocol.Contract{Task: "explore",
			Verification: protocol.Verification{None: &struct{}{}}, Stall: &protocol.StallSpec{Window: 3, MaxReplans: 1}}}}
		for i := 1; i <= n; i++ {
			args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("src/file%d.go", i)})
			turn := &protocol.Turn{Text: "Reading the next file.", ToolCalls: []protocol.ToolCall{{ID: fmt.Sprint(i), Name: "read_file", Arguments: args}}}
			recs = append(recs, protocol.Record{Kind: protocol.RecordStep, Step: i, Turn: turn,
				Observations: []protocol.Observation{{CallID: fmt.Sprint(i), Tool: "read_file", Content: "package src"}}})
		}
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := newRunState("bench", recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/step")
		})
	}
}
