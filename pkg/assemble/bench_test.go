package assemble

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// observations is a run of n steps, each one call with a result of size
// bytes: reads of different files mostly, with greps, commands, and
// writes that make earlier reads stale.
func observations(n, size int) Input {
	in := Input{System: "You are an agent.", Task: "Task: read every file.", Step: n + 1,
		Tools: []protocol.ToolSpec{{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("call_%d", i)
		body := strings.Repeat(fmt.Sprintf("line %d of the file, padded out. ", i), size/32+1)[:size]
		var call protocol.ToolCall
		switch i % 10 {
		case 3:
			call = protocol.ToolCall{Name: "grep", Arguments: json.RawMessage(fmt.Sprintf(`{"pattern":"func F%d","path_glob":"*.go"}`, i%7))}
		case 6:
			call = protocol.ToolCall{Name: "exec", Arguments: json.RawMessage(`{"argv":["go","test","./..."]}`)}
		case 9:
			call = protocol.ToolCall{Name: "write_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"f%03d.go","content":"package f"}`, i-8))}
			body = "wrote 9 bytes"
		default:
			call = protocol.ToolCall{Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"f%03d.go"}`, i))}
		}
		call.ID = id
		in.Steps = append(in.Steps, Step{N: i, Turn: protocol.Message{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{call}},
			Results: []Result{{CallID: id, Content: body}}})
	}
	return in
}

// BenchmarkAssemble assembles one request over 1,000 observations of 2 KB:
// under a 24,000-token context (pressure: most results stubbed, the
// oldest steps collapsed), and under a window they all fit in.
//
//	go test -run '^$' -bench Assemble ./pkg/assemble
func BenchmarkAssemble(b *testing.B) {
	for _, c := range []struct {
		name   string
		budget int
	}{{"1000-observations-24k", 24_000}, {"1000-observations-fits", 1_000_000}} {
		b.Run(c.name, func(b *testing.B) {
			in := observations(1000, 2<<10)
			in.Budget, in.Output = c.budget, 4096
			out := Assemble(in)
			b.ReportAllocs()
			for b.Loop() {
				Assemble(in)
			}
			b.ReportMetric(float64(out.Stats.Estimate), "tokens")
			b.ReportMetric(float64(out.Stats.Carried), "carried")
		})
	}
}

// BenchmarkStrLen measures the estimate's inner loop: the size of 2 KB of
// plain text as a JSON string.
func BenchmarkStrLen(b *testing.B) {
	s := strings.Repeat("line 12 of the file, padded out. ", 64)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		strLen(s)
	}
}

// BenchmarkAssembleRun assembles every request of a 100-step run in
// turn, as its driver does (the steps before each request, 1 KB results,
// all fitting), without a Memo and with one kept across the run, and
// reports the time of one request's assembly.
//
//	go test -run '^$' -bench AssembleRun ./pkg/assemble
func BenchmarkAssembleRun(b *testing.B) {
	full := observations(100, 1<<10)
	full.Budget, full.Output = 1_000_000, 4096
	for _, kept := range []bool{false, true} {
		b.Run(fmt.Sprintf("memo=%t", kept), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m *Memo
				if kept {
					m = &Memo{}
				}
				for k := 1; k <= len(full.Steps); k++ {
					in := full
					in.Steps, in.Step, in.Memo = full.Steps[:k], k+1, m
					Assemble(in)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(full.Steps)), "ns/request")
		})
	}
}
