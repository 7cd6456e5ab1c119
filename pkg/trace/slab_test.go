package trace

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestSlabDecodesAsBareRecords decodes records of every shape a trace
// holds into a slab, and each into a bare record (Decode), and finds them
// the same: a record with no turn gets none, a turn with nothing in it is
// kept, lists longer than the room laid grow, and growing one record's
// list leaves the next record's alone.
func TestSlabDecodesAsBareRecords(t *testing.T) {
	call := func(id string) protocol.ToolCall {
		return protocol.ToolCall{ID: id, Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go","turn":{"usage":1}}`)}
	}
	now := time.Now().UTC()
	recs := []protocol.Record{
		{Format: 1, Kind: protocol.RecordStarted, Run: "r", Time: now, Contract: &protocol.Contract{Task: "Explore."}, Tree: "r"},
		{Format: 1, Kind: protocol.RecordStep, Run: "r", Step: 1, Time: now,
			Turn:         &protocol.Turn{Text: "Reading.", ToolCalls: []protocol.ToolCall{call("c1")}, Usage: protocol.Usage{InputTokens: 400, OutputTokens: 20}},
			Observations: []protocol.Observation{{CallID: "c1", Tool: "read_file", Content: "package a\n"}},
			Draws:        []protocol.Draw{{Key: "tree", Spend: protocol.Spend{InputTokens: 400, OutputTokens: 20, Steps: 1}}},
			Assembled:    &protocol.Assembly{Budget: 1000, Estimate: 10}},
		{Format: 1, Kind: protocol.RecordStep, Run: "r", Step: 2, Time: now,
			Turn: &protocol.Turn{ToolCalls: []protocol.ToolCall{call("c2"), call("c3"), call("c4")}, Usage: protocol.Usage{InputTokens: 1}},
			Observations: []protocol.Observation{{CallID: "c2", Tool: "read_file"}, {CallID: "c3", Tool: "read_file", IsError: true},
				{CallID: "c4", Tool: "read_file", Refused: &protocol.Refusal{Act: "read", Target: "a.go", Effect: "deny"}}},
			Draws:   []protocol.Draw{{Key: "a"}, {Key: "b"}},
			Rereads: []protocol.Observation{{CallID: "c1", Tool: "read_file", Content: "package a // changed\n"}}},
		{Format: 1, Kind: protocol.RecordStep, Run: "r", Step: 3, Time: now, Turn: &protocol.Turn{}},
		{Format: 1, Kind: protocol.RecordStep, Run: "r", Step: 4, Time: now, Turn: &protocol.Turn{Text: "Done.", Usage: protocol.Usage{InputTokens: 0, OutputTokens: 3}}},
		{Format: 1, Kind: protocol.RecordStep, Run: "r", Step: 5, Time: now, TurnRef: "sha256-abc"},
		{Format: 1, Kind: protocol.RecordPolicy, Run: "r", Step: 5, Time: now, Policy: &protocol.Policy{}},
		{Format: 1, Kind: protocol.RecordFinished, Run: "r", Step: 5, Time: now, Outcome: protocol.OutcomeFinished,
			Draws: []protocol.Draw{{Key: "tree", Spend: protocol.Spend{Steps: 1}}}},
	}
	var data [][]byte
	for _, rec := range recs {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	// Room for all but the last two: those are decoded beyond the slab.
	sl := newSlab(len(data) - 2)
	for i, b := range data {
		rec := sl.next()
		if err := decodeInto(b, rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for i, b := range data {
		bare, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := &sl.recs[i]; !reflect.DeepEqual(got, bare) {
			t.Errorf("record %d from the slab:\n%+v\nbare:\n%+v", i, got, bare)
		}
	}
	if sl.recs[3].Turn == nil {
		t.Error("a step whose turn holds nothing lost its turn")
	}
	if sl.recs[0].Turn != nil || sl.recs[5].Turn != nil {
		t.Error("a record with no turn was given one")
	}
	// A list grown in place stays within its own record's room.
	next := sl.recs[2].Observations[0]
	sl.recs[1].Observations = append(sl.recs[1].Observations, protocol.Observation{CallID: "extra"})
	sl.recs[1].Turn.ToolCalls = append(sl.recs[1].Turn.ToolCalls, call("extra"))
	if !reflect.DeepEqual(sl.recs[2].Observations[0], next) || sl.recs[2].Turn.ToolCalls[0].ID != "c2" {
		t.Error("growing one record's list wrote over the next record's")
	}
}

// BenchmarkDecodeRecords decodes the 1,000 step records of a run that
// read a small file at each step, into a slab as Read does and each into a
// bare record, beside each other:
//
//	go test -run '^$' -bench DecodeRecords -benchmem ./pkg/trace
func BenchmarkDecodeRecords(b *testing.B) {
	var data [][]byte
	for i := 1; i <= 1000; i++ {
		turn := &protocol.Turn{Text: "Reading the next file.", Usage: protocol.Usage{InputTokens: 400, OutputTokens: 20},
			ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"src/file%d.go"}`, i))}}}
		rec := &protocol.Record{Format: 1, Kind: protocol.RecordStep, Run: "r", Step: i, Time: time.Now().UTC(), Turn: turn, Tokens: int64(420 * i),
			Observations: []protocol.Observation{{CallID: turn.ToolCalls[0].ID, Tool: "read_file", Content: fmt.Sprintf("package src\n\nfunc F%d() int { return %d }\n", i, i)}},
			Draws:        []protocol.Draw{{Key: fmt.Sprintf("r.%d", i), Spend: protocol.Spend{InputTokens: 400, OutputTokens: 20, Steps: 1}}}}
		b, err := json.Marshal(rec)
		if err != nil {
			panic(err)
		}
		data = append(data, b)
	}
	b.Run("slab", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sl := newSlab(len(data))
			for _, d := range data {
				if err := decodeInto(d, sl.next()); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			recs := make([]protocol.Record, len(data))
			for i, d := range data {
				if err := checked(wirejson.UnmarshalShared(d, &recs[i]), &recs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
