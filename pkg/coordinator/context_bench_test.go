package coordinator

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/assemble"
	"github.com/ioharness/harness/pkg/protocol"
)

// readingRun is the trace of a run of n steps, each reading a different
// file of size bytes, under a context of budget tokens (0: the model's
// window).
func readingRun(n, size, budget int) []protocol.Record {
	c := &protocol.Contract{Task: "read every file", Workspace: protocol.Workspace{Root: "/w"},
		Verification: protocol.Verification{None: &struct{}{}}, Provider: protocol.ProviderSpec{Model: "m", MaxOutputTokens: 1024}}
	if budget > 0 {
		c.Context = &protocol.ContextSpec{MaxTokens: budget}
	}
	recs := []protocol.Record{{Kind: protocol.RecordStarted, Run: "r", Contract: c, Time: time.Unix(0, 0)}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("r%d", i)
		body := strings.Repeat(fmt.Sprintf("line of file %d, padding it out. ", i), size/32+1)[:size]
		recs = append(recs, protocol.Record{Kind: protocol.RecordStep, Run: "r", Step: i,
			Turn:         &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: id, Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"f%03d.txt"}`, i))}}},
			Observations: []protocol.Observation{{CallID: id, Tool: "read_file", Content: body}}})
	}
	return recs
}

// promptTokens sums the estimated input of every request of the run, each
// assembled from the steps before it.
func promptTokens(b *testing.B, recs []protocol.Record) (total int, per time.Duration) {
	s, err := newRunState("r", recs[:1])
	if err != nil {
		b.Fatal(err)
	}
	var took time.Duration
	for i := 1; i < len(recs); i++ {
		began := time.Now()
		out := assemble.Assemble(s.assembleInput(inputs{}))
		took += time.Since(began)
		total += out.Stats.Estimate
		if err := s.apply(&recs[i]); err != nil {
			b.Fatal(err)
		}
	}
	return total, took / time.Duration(len(recs)-1)
}

// BenchmarkContextAssembly measures what assembly saves a long run: the
// prompt tokens of 300 steps each reading a different 16 KB file under a
// context of 24,000 tokens, against the same run carrying its whole
// transcript (a budget no request reaches), as a ratio; and the time one
// assembly takes over 1,000 observations.
//
//	go test -run '^$' -bench ContextAssembly -benchtime 1x ./pkg/coordinator
func BenchmarkContextAssembly(b *testing.B) {
	b.Run("prompt-tokens", func(b *testing.B) {
		for b.Loop() {
			fitted, _ := promptTokens(b, readingRun(300, 16<<10, 24_000))
			whole, _ := promptTokens(b, readingRun(300, 16<<10, math.MaxInt32))
			b.ReportMetric(float64(fitted), "tokens-fitted")
			b.ReportMetric(float64(whole), "tokens-whole")
			b.ReportMetric(float64(whole)/float64(fitted), "whole/fitted")
		}
	})
	b.Run("1000-observations", func(b *testing.B) {
		recs := readingRun(1000, 2<<10, 24_000)
		s, err := newRunState("r", recs)
		if err != nil {
			b.Fatal(err)
		}
		in := s.assembleInput(inputs{})
		for b.Loop() {
			assemble.Assemble(in)
		}
	})
}
