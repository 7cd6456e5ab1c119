package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/protocol"
)

func cmdCancel(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "cancel", "[flags] RUN", `Stops a run now, wherever it is driven, and ends it cancelled (exit code 11
for whoever waits on it), with who asked and why in its trace: the model's
call in flight is abandoned (charged at its estimate), the command running
is killed, a paused run ends too, and its sub-agents are cancelled with it.
Cancelling a cancelled run again changes nothing. It waits for the run's
end unless --no-wait.`)
	natsURL := fs.String("nats", "", "NATS URL of the cluster (default $NATS_URL)")
	env.nats = streams.AuthFlags(fs, env.getenv)
	data := fs.String("data", "", "data directory")
	reason := fs.String("reason", "", "why, for the run's record")
	by := fs.String("by", "", "who cancels, as the trace records it (default cli:$USER)")
	asJSON := fs.Bool("json", false, "print the cancel and the run's result as JSON on stdout")
	noWait := fs.Bool("no-wait", false, "return once the cancel is recorded")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the run's end")
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	run, dir := pos[0], dataDir(env, *data)
	c, closeFn, local, err := clientFor(ctx, env, *natsURL, dir)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	if local {
		// Nothing serves the data directory: a coordinator of this
		// process ends the run. It calls no provider.
		closeFn()
		cl, err := harness.Start(ctx, harness.Config{DataDir: dir, Provider: noProvider{}, NoTakeover: true})
		if err != nil {
			fail(env.stderr, "open %s: %v", dir, err)
			return exitError
		}
		defer cl.Close()
		c, closeFn = cl.Client, func() {}
	}
	defer closeFn()
	h := c.Run(run)
	mark, err := h.Cancel(ctx, decidedBy(env, *by), *reason)
	if err != nil {
		fail(env.stderr, "%v", err)
		if errors.Is(err, protocol.ErrUnknownRun) || errors.Is(err, protocol.ErrRunFinished) {
			return exitUsage
		}
		return exitError
	}
	var res *protocol.Result
	if !*noWait {
		wctx, cancel := context.WithTimeout(ctx, *timeout)
		if local {
			// A run its killed process left is this process's to end, once
			// that process's lease runs out.
			res, err = h.Resume(wctx)
		} else {
			res, err = h.Wait(wctx)
		}
		cancel()
		if err != nil {
			fail(env.stderr, "the cancel of %s is recorded; its end was not seen within %s (harness status %s shows it): %v", run, *timeout, run, err)
			return exitError
		}
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Cancel *protocol.Cancel `json:"cancel"`
			Result *protocol.Result `json:"result,omitempty"`
		}{mark, res})
		return exitOK
	}
	if res == nil {
		fmt.Fprintf(env.stdout, "cancel of %s recorded (by %s)\n", run, mark.By)
		return exitOK
	}
	fmt.Fprintf(env.stdout, "run %s %s after %d steps: %s\n", run, res.Outcome, res.Steps, res.Reason)
	return exitOK
}

// noProvider is the provider of a process that calls none.
type noProvider struct{}

func (noProvider) Name() string { return "none" }

func (noProvider) Complete(context.Context, *protocol.CompletionRequest) (*protocol.Turn, error) {
	return nil, protocol.Errorf(protocol.CodeUnavailable, "this process has no provider")
}
