package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
)

// terminalApprover asks the person at the terminal about each action the
// policy asks about.
func terminalApprover(env *environ) coordinator.Approver {
	in := bufio.NewReader(env.stdin)
	return coordinator.ApproverFunc(func(ctx context.Context, p *protocol.Pending) (*protocol.Decision, error) {
		fmt.Fprintf(env.stderr, "\nThe agent asks to %s %q (%s).\n%s\nAllow? [y/N] ", p.Act, p.Target, orDefault(p.Rule, "the default"), p.Shown)
		line, err := in.ReadString('\n')
		if err != nil {
			return nil, err // no answer: defer to a person, durably
		}
		d := &protocol.Decision{By: "terminal", Time: time.Now().UTC()}
		if strings.EqualFold(strings.TrimSpace(line), "y") {
			d.Approve = true
		} else {
			d.Reason = "denied at the terminal"
		}
		return d, nil
	})
}

// decidedBy names the person deciding at this command line: as stated
// with --by, else the login name, for the trace.
func decidedBy(env *environ, stated string) string {
	if s := strings.TrimSpace(stated); s != "" {
		return s
	}
	if u := env.getenv("USER"); u != "" {
		return "cli:" + u
	}
	return "cli"
}

func cmdApprove(ctx context.Context, env *environ, args []string) int {
	return decide(ctx, env, args, true)
}

func cmdDeny(ctx context.Context, env *environ, args []string) int {
	return decide(ctx, env, args, false)
}

func decide(ctx context.Context, env *environ, args []string, approve bool) int {
	name, about := "deny", "Denies an action a paused run waits for: the run ends denied, with the reason."
	if approve {
		name, about = "approve", `Approves an action a paused run waits for. The action is checked against the
run's policy again (an approval never crosses a deny), performed exactly as
the person was shown it (or as rewritten), and the run carries on.`
	}
	fs := newFlags(env, name, "[flags] ID", about+`

On a cluster (--nats or $NATS_URL, or a harness process on the data
directory) the decision is recorded and the cluster carries the run on. On
the embedded default this process carries it on to its outcome when it has
a provider (--replay, or OPENAI_API_KEY), in the sandboxes harness run would
use (--backends, --allow-floor); otherwise it records the decision for
harness resume. A decision may be made before the run pauses.`)
	natsURL := fs.String("nats", "", "NATS URL of the cluster (default $NATS_URL)")
	env.nats = streams.AuthFlags(fs, env.getenv)
	data := fs.String("data", "", "data directory")
	replay := fs.String("replay", "", "carry the run on answering turns from this cassette")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	roles := clusterFlags(env, fs)
	by := fs.String("by", "", "who decides, as the trace records it (default cli:$USER)")
	var rewrite, reason *string
	var remember *bool
	if approve {
		rewrite = fs.String("rewrite", "", "the call's new arguments, as a JSON object, to perform instead")
		remember = fs.Bool("remember", false, "allow the same act on the same target for the rest of the run")
	} else {
		reason = fs.String("reason", "", "why, for the run's record and the model")
	}
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	id := pos[0]
	run, _, _, err := protocol.ParseApprovalID(id)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	d := &protocol.Decision{Approve: approve, By: decidedBy(env, *by), Time: time.Now().UTC()}
	if approve {
		d.Remember = *remember
		if *rewrite != "" {
			d.Rewrite = json.RawMessage(*rewrite)
		}
	} else {
		d.Reason = *reason
	}
	dir := dataDir(env, *data)
	c, closeFn, local, err := clientFor(ctx, env, *natsURL, dir)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	ap, err := c.Decide(ctx, id, d)
	closeFn()
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	fmt.Fprintf(env.stderr, "decision on %s recorded\n", id)
	// When nothing more happens here, the recorded approval is what
	// --json prints.
	printApproval := func() {
		if *asJSON {
			enc := json.NewEncoder(env.stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(ap)
		}
	}
	if !local {
		printApproval()
		fmt.Fprintf(env.stderr, "the cluster carries run %s on; harness status %s shows where it stands\n", run, run)
		return exitOK
	}
	p, source, err := chooseProvider(env, *replay, "")
	if err != nil {
		fmt.Fprintf(env.stderr, "carry the run on with: harness resume %s (with --replay CASSETTE or OPENAI_API_KEY)\n", run)
		printApproval()
		return exitOK
	}
	cluster, err := roles.option(ctx, env, slog.New(slog.DiscardHandler))
	if err != nil {
		fail(env.stderr, "%v", err)
		fmt.Fprintf(env.stderr, "the decision is recorded; carry the run on with: harness resume %s\n", run)
		return exitUsage
	}
	fmt.Fprintf(env.stderr, "run %s\n  provider  %s\n", run, source)
	res, err := harness.Resume(ctx, run, harness.WithProvider(p), harness.WithDataDir(dir), harness.WithObserver(progress(env.stderr)), cluster)
	if err != nil {
		return reportContractError(env, err)
	}
	return printResult(env, res, *asJSON)
}
