package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

func cmdLs(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "ls", "[flags]", `Lists the runs the cluster's run index holds, newest first: id, status,
outcome, pool, steps, tokens, age and task.`)
	at := targetFlags(env, fs)
	state := fs.String("state", "", "only runs with this status: running, paused, completed, failed (or an outcome, such as cancelled)")
	pool := fs.String("pool", "", "only runs whose turns go to this worker pool")
	tenant := fs.String("tenant", "", "only runs this tenant submitted")
	since := fs.Duration("since", 0, "only runs started within this long, such as 1h")
	asJSON := fs.Bool("json", false, "print the runs' states as a JSON array")
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	if *state != "" && !knownState(*state) {
		fail(env.stderr, "--state %q is not a status or an outcome; use running, paused, completed, failed, or an outcome such as success or cancelled", *state)
		return exitUsage
	}
	c, closeFn, code := at.connect(ctx, env)
	if c == nil {
		return code
	}
	defer closeFn()
	runs, err := c.Runs(ctx)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	now := time.Now()
	runs = slices.DeleteFunc(runs, func(st protocol.RunState) bool {
		return *state != "" && string(st.Status) != *state && string(st.Outcome) != *state ||
			*pool != "" && st.Pool != *pool ||
			*tenant != "" && st.Tenant != *tenant ||
			*since > 0 && now.Sub(st.Started) > *since
	})
	slices.SortFunc(runs, func(a, b protocol.RunState) int { return b.Started.Compare(a.Started) })
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if runs == nil {
			runs = []protocol.RunState{}
		}
		_ = enc.Encode(runs)
		return exitOK
	}
	w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSTATUS\tOUTCOME\tPOOL\tSTEPS\tTOKENS\tAGE\tTASK")
	for _, st := range runs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", st.Run, st.Status, orDash(string(st.Outcome)), orDash(st.Pool), st.Step, st.Tokens,
			age(now.Sub(st.Started)), oneLine(st.Task, 60))
	}
	_ = w.Flush()
	if len(runs) == 0 {
		fmt.Fprintln(env.stderr, "no runs")
	}
	return exitOK
}

func knownState(s string) bool {
	switch protocol.Status(s) {
	case protocol.StatusRunning, protocol.StatusPaused, protocol.StatusCompleted, protocol.StatusFailed:
		return true
	}
	return slices.Contains(protocol.Outcomes, protocol.Outcome(s))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age is a duration as an operator reads an age: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func cmdApprovals(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "approvals", "[flags]", `Lists the actions paused runs wait for a person to decide, oldest first,
with exactly what each would do: decide each with harness approve ID or
harness deny ID. Decided actions, and those of runs that have ended, are
not listed.`)
	at := targetFlags(env, fs)
	asJSON := fs.Bool("json", false, "print the pending actions as a JSON array")
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	c, closeFn, code := at.connect(ctx, env)
	if c == nil {
		return code
	}
	defer closeFn()
	pending, err := c.Pending(ctx)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if pending == nil {
			pending = []protocol.Approval{}
		}
		_ = enc.Encode(pending)
		return exitOK
	}
	if len(pending) == 0 {
		fmt.Fprintln(env.stderr, "no action waits for a decision")
		return exitOK
	}
	now := time.Now()
	for _, ap := range pending {
		p := ap.Pending
		fmt.Fprintf(env.stdout, "%s  %s %q (tool %s, %s ago", ap.ID, p.Act, p.Target, p.Tool, age(now.Sub(p.Time)))
		if p.Rule != "" {
			fmt.Fprintf(env.stdout, ", rule %q of layer %s", p.Rule, p.Layer)
		}
		fmt.Fprintln(env.stdout, ")")
		for _, line := range strings.Split(strings.TrimRight(p.Shown, "\n"), "\n") {
			fmt.Fprintf(env.stdout, "    %s\n", line)
		}
	}
	return exitOK
}
