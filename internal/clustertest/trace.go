package clustertest

import (
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/redistest"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
)

// CheckTrace checks a finished run's trace record by record: it starts,
// has one record per committed step numbered from 1 with a running token
// total and an observation answering each call, and ends with the outcome
// the result reports.
func CheckTrace(t testing.TB, recs []protocol.Record, res *protocol.Result) {
	t.Helper()
	if len(recs) != res.Steps+2 {
		t.Fatalf("trace has %d records for %d steps, want %d: %v", len(recs), res.Steps, res.Steps+2, RecordKinds(recs))
	}
	if recs[0].Kind != protocol.RecordStarted || recs[0].Contract == nil {
		t.Errorf("record 0 = %s, want started with the contract", recs[0].Kind)
	}
	var tokens int64
	for i, r := range recs[1 : len(recs)-1] {
		if r.Kind != protocol.RecordStep || r.Step != i+1 || r.Turn == nil {
			t.Errorf("record %d = %s step %d, want step %d with its turn", i+1, r.Kind, r.Step, i+1)
			continue
		}
		tokens += r.Turn.Usage.Total()
		if r.Tokens != tokens {
			t.Errorf("step %d tokens = %d, want the running total %d", r.Step, r.Tokens, tokens)
		}
		if len(r.Observations) != len(r.Turn.ToolCalls) {
			t.Errorf("step %d has %d observations for %d calls", r.Step, len(r.Observations), len(r.Turn.ToolCalls))
		}
		for j, o := range r.Observations {
			if o.CallID != r.Turn.ToolCalls[j].ID {
				t.Errorf("step %d observation %d answers %q, want %q", r.Step, j, o.CallID, r.Turn.ToolCalls[j].ID)
			}
		}
	}
	last := recs[len(recs)-1]
	if last.Kind != protocol.RecordFinished || last.Outcome != res.Outcome || last.Step != res.Steps || last.Tokens != res.Tokens {
		t.Errorf("last record = %s %s at %d with %d tokens, want finished %s at %d with %d", last.Kind, last.Outcome, last.Step, last.Tokens,
			res.Outcome, res.Steps, res.Tokens)
	}
}

// ReadTrace opens the data directory's store, with nothing running on
// it, and returns the run's trace.
func ReadTrace(t testing.TB, data, run string) []protocol.Record {
	t.Helper()
	c, err := harness.Open(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	recs, err := c.Run(run).Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// RecordKinds lists the kinds of a trace's records, in order.
func RecordKinds(recs []protocol.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Kind)
	}
	return out
}

// Canonical strips what legitimately differs between two runs of the same
// cassette: times, ids, paths, durations and the verification's raw
// output.
func Canonical(recs []protocol.Record) []protocol.Record {
	out := make([]protocol.Record, len(recs))
	for i, r := range recs {
		if r.Tree == r.Run {
			r.Tree = "" // a root's tree is its own id
		}
		if len(r.Draws) > 0 {
			draws := make([]protocol.Draw, len(r.Draws))
			for j, d := range r.Draws {
				d.Key = strings.TrimPrefix(d.Key, r.Run) // run.step.attempt
				draws[j] = d
			}
			r.Draws = draws
		}
		r.Time, r.Run, r.Coordinator = time.Time{}, "", ""
		if r.Turn != nil {
			turn := *r.Turn
			turn.Served = "" // who served differs between a recording and its replay
			r.Turn = &turn
		}
		if r.Contract != nil {
			c := *r.Contract
			c.Workspace.Root = ""
			r.Contract = &c
		}
		if r.Check != nil {
			ch := *r.Check
			ch.Output = ""
			if ch.Exec != nil {
				e := *ch.Exec
				e.DurationMS = 0
				ch.Exec = &e
			}
			r.Check = &ch
		}
		obs := make([]protocol.Observation, len(r.Observations))
		for j, o := range r.Observations {
			if o.Exec != nil {
				e := *o.Exec
				e.DurationMS = 0
				o.Exec = &e
			}
			obs[j] = o
		}
		r.Observations = obs
		out[i] = r
	}
	return out
}

// TraceSpend sums what a run's trace says it drew from the budget ledger,
// and fails t for a step that records other than one draw.
func TraceSpend(t testing.TB, recs []protocol.Record) ledger.Usage {
	t.Helper()
	var u ledger.Usage
	for _, r := range recs {
		for _, d := range r.Draws {
			u = u.Add(ledger.Usage{InputTokens: d.InputTokens, OutputTokens: d.OutputTokens, CostMicros: d.CostMicros, Steps: d.Steps})
		}
		if r.Kind == protocol.RecordStep && len(r.Draws) != 1 {
			t.Errorf("step %d records %d draws, want 1", r.Step, len(r.Draws))
		}
	}
	return u
}

// CheckCharged checks that the ledger charged a tree exactly what the
// traces of its runs say they drew, and holds nothing.
func CheckCharged(t testing.TB, l ledger.Ledger, tree string, traces ...[]protocol.Record) {
	t.Helper()
	var want ledger.Usage
	for _, recs := range traces {
		want = want.Add(TraceSpend(t, recs))
	}
	tot, err := l.Totals(t.Context(), tree)
	if err != nil {
		t.Fatalf("ledger totals of %s: %v", tree, err)
	}
	if tot.Spent != want || tot.Reserved != (ledger.Usage{}) {
		t.Errorf("ledger of tree %s: spent %+v, reserved %+v; the traces drew %+v (charged once, nothing left held)", tree, tot.Spent, tot.Reserved, want)
	}
}

// RedisLedger is the budget ledger on the Redis server srv, closed when t
// ends.
func RedisLedger(t testing.TB, srv *redistest.Server) ledger.Ledger {
	t.Helper()
	l, closeL, err := ledger.Dial(t.Context(), srv.URL(), ledger.RedisConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeL() })
	return l
}
