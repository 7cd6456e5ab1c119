package trace_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// BenchmarkIndexList lists a run index of 20 runs and of 2,000, each
// written twice, with the watch and with the direct get a coordinator
// uses (trace.ListDirect), which the larger index passes to the watch.
func BenchmarkIndexList(b *testing.B) {
	for _, n := range []int{20, 2000} {
		js, err := jetstream.New(testkit.Conn(b, testkit.NATS(b)))
		if err != nil {
			b.Fatal(err)
		}
		kv, err := js.CreateKeyValue(b.Context(), jetstream.KeyValueConfig{Bucket: "runs"})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			st := protocol.RunState{Run: fmt.Sprintf("run-%d", i), Status: protocol.StatusRunning, Task: "Fix the failing test in calc."}
			for _, status := range []protocol.Status{protocol.StatusRunning, protocol.StatusCompleted} {
				st.Status = status
				if err := trace.NewIndex(kv, nil).Put(b.Context(), &st); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, direct := range []bool{false, true} {
			var opts []trace.IndexOption
			if direct {
				opts = append(opts, trace.ListDirect())
			}
			x := trace.NewIndex(kv, js, opts...)
			b.Run(fmt.Sprintf("runs=%d/direct=%v", n, direct), func(b *testing.B) {
				for b.Loop() {
					if got, err := x.List(b.Context()); err != nil || len(got) != n {
						b.Fatalf("List = %d runs, %v; want %d", len(got), err, n)
					}
				}
			})
		}
	}
}
