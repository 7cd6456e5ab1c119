package trace

import (
	"math"

	"github.com/ioharness/harness/pkg/protocol"
)

// slab holds the records of one read of a run, and beside them the room
// their decoding fills at almost every step: a turn, its one tool call,
// one observation, one draw. The decoder gives a slice it grows from
// nothing room for ten elements, so a step record decoded into bare
// fields took room for ten observations, ten draws and ten tool calls for
// the one of each it holds: 2.8 KB a record, more than its own bytes, and
// most of what a resume spent decoding. The decoder fills a slice that
// already has room, and a turn already pointed to, so each record is laid
// with room for one of each, taken from arrays made once for the read,
// and what its decoding did not use is taken back (settle). A record that
// holds more grows its slice as before.
type slab struct {
	recs  []protocol.Record
	turns []protocol.Turn
	calls []protocol.ToolCall
	obs   []protocol.Observation
	draws []protocol.Draw
}

// newSlab is a slab for n records.
func newSlab(n int) *slab {
	return &slab{recs: make([]protocol.Record, 0, n), turns: make([]protocol.Turn, n),
		calls: make([]protocol.ToolCall, n), obs: make([]protocol.Observation, n), draws: make([]protocol.Draw, n)}
}

// next is the slab's next record, laid for decoding. One beyond the n the
// slab was made for is a bare record, at the end of records.
func (s *slab) next() *protocol.Record {
	i := len(s.recs)
	s.recs = append(s.recs, protocol.Record{})
	rec := &s.recs[i]
	if i >= len(s.turns) {
		return rec
	}
	// Each slice's capacity ends at its own element, so that growing
	// one never writes over the next record's.
	t := &s.turns[i]
	t.ToolCalls = s.calls[i : i : i+1]
	t.Usage.InputTokens = unread
	rec.Turn = t
	rec.Observations = s.obs[i : i : i+1]
	rec.Draws = s.draws[i : i : i+1]
	return rec
}

// unread marks a laid turn as not yet decoded into: every turn written
// has usage.input_tokens, so a laid turn that still holds it was in no
// record (one of another kind than a step).
const unread = math.MinInt64

// settle takes back from rec what its decoding did not fill, leaving it as
// a record decoded into bare fields: no turn where the record has none,
// and no slice of no elements. (A record written with an empty list, which
// harness's own writer never does, as every list is omitted when empty,
// is read with none.)
func settle(rec *protocol.Record) {
	if t := rec.Turn; t != nil {
		if t.Usage.InputTokens == unread {
			rec.Turn = nil
		} else if len(t.ToolCalls) == 0 {
			t.ToolCalls = nil
		}
	}
	if len(rec.Observations) == 0 {
		rec.Observations = nil
	}
	if len(rec.Draws) == 0 {
		rec.Draws = nil
	}
}
