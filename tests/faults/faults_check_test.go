package faults

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
)

// runFindings is what checking one run found, besides its anomalies.
type runFindings struct {
	outcome       string
	indeterminate int
	unanswered    int
	again         int
	looks         int
	branched      bool
}

// check checks every run of the loop, a few at a time, and adds what it
// found to rep; each failed check is an anomaly of the loop.
func (l *faultLoop) check(rep *loopReport) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, r := range l.runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			f := l.checkRun(l.t.Context(), r)
			mu.Lock()
			defer mu.Unlock()
			rep.outcomes[f.outcome]++
			rep.indeterminate += f.indeterminate
			rep.unanswered += f.unanswered
			rep.again += f.again
			rep.looks += f.looks
			if f.branched {
				rep.replayBranch++
			}
		})
	}
	wg.Wait()
}

var againID = regexp.MustCompile(`^e\da([2-9]|\d\d)$`)

// checkRun checks one run: its outcome, its trace, its spend, its
// workspace, and its replay.
func (l *faultLoop) checkRun(ctx context.Context, r *faultRun) runFindings {
	var f runFindings
	bad := func(format string, args ...any) { l.anomaly("run %s: %s", r.id, fmt.Sprintf(format, args...)) }
	st, err := l.client.Run(r.id).Status(ctx)
	if err != nil {
		f.outcome = "unknown"
		bad("status: %v", err)
		return f
	}
	f.outcome = string(st.Outcome)
	want := protocol.OutcomeSuccess
	if r.kind == "deny" {
		want = protocol.OutcomeDenied
	}
	if st.Status != protocol.StatusCompleted || st.Outcome != want {
		bad("%s %s (%s), want completed %s", st.Status, st.Outcome, st.Reason, want)
	}
	recs, err := l.client.Run(r.id).Trace(ctx)
	if err != nil {
		bad("trace: %v", err)
		return f
	}
	for _, s := range CheckShape(recs, st) {
		bad("%s", s)
	}
	for _, s := range CheckSpend(st, recs) {
		bad("%s", s)
	}
	for _, s := range CheckLedger(ctx, l.ledger, r.id, recs) {
		bad("%s", s)
	}
	for _, rec := range recs {
		for _, o := range rec.Observations {
			switch o.State() {
			case protocol.CallIndeterminate:
				f.indeterminate++
			case protocol.CallUnanswered:
				f.unanswered++
			}
		}
		if rec.Turn != nil {
			for _, c := range rec.Turn.ToolCalls {
				if againID.MatchString(c.ID) {
					f.again++
				}
				if strings.HasPrefix(c.ID, "l") {
					f.looks++
				}
			}
		}
	}

	// Each change exactly once.
	got, err := ReadTree(r.ws)
	if err != nil {
		bad("read the workspace: %v", err)
		return f
	}
	if !maps.Equal(got, agentFinal(r.kind)) {
		bad("workspace = %q, want %q: a change landed twice or not at all", got, agentFinal(r.kind))
	}

	// The trace replayed from the start gives the same workspace and the
	// same outcome.
	ops, err := ReplayOps(recs)
	if err != nil {
		bad("replay: %v", err)
		return f
	}
	for _, op := range ops {
		f.branched = f.branched || op.Unknown
	}
	base := filepath.Join(l.dir, "replay", r.id)
	dir, err := ReplayExplains(ctx, ops, base, agentWorkspace, got)
	switch {
	case err != nil:
		bad("replay: %v", err)
		return f
	case dir == "":
		bad("replaying the trace from the start does not give the workspace %q", got)
		return f
	}
	outcome := ReplayOutcome(recs)
	if outcome != st.Outcome {
		bad("replaying the trace gives the outcome %q, the run recorded %q", outcome, st.Outcome)
	}
	if outcome == protocol.OutcomeSuccess {
		v := recs[0].Contract.Verification.Command
		res, err := floor.New().Run(ctx, sandbox.Spec{Argv: v.Argv, Dir: dir, Env: sandbox.MinimalEnv(), Limits: protocol.Limits{}.WithDefaults()})
		if err != nil || !res.Report.Exited || res.Report.ExitCode != v.ExpectExit {
			bad("the verification fails on the replayed workspace: %v %+v", err, res)
		}
	}
	return f
}
