package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
)

func cmdResume(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "resume", "[flags] RUN",
		`Carries on a run whose process was killed or interrupted, from the step
after its last committed one, on the embedded default with the same data
directory. Completed steps are not run again; a turn already durable is
reused, not paid for twice. A finished run reports its outcome without
calling the provider. The provider is --replay FILE, or OpenAI (or any
OpenAI-compatible server) when OPENAI_API_KEY is set, as for harness run;
the cassette beside a contract is not known here. The sandboxes are chosen
as for harness run (--backends, --allow-floor).`)
	data := fs.String("data", "", "data directory (default $HARNESS_DATA or ~/.local/share/harness)")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	replay := fs.String("replay", "", "answer turns from this cassette")
	verbose := fs.Bool("v", false, "log what the roles do to stderr")
	policyFile := fs.String("policy", "", "carry the run on under the policy in this JSON file (the contract's \"policy\" object), recorded as the run's policy")
	roles := clusterFlags(env, fs)
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	run, dir := pos[0], dataDir(env, *data)
	p, source, err := chooseProvider(env, *replay, "")
	if err != nil {
		// A finished run needs no provider, and a run that is not there
		// is said to be missing before anything is asked of the caller.
		if code, ok := finishedOrUnknown(ctx, env, dir, run, *asJSON); ok {
			return code
		}
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	cluster, err := roles.option(ctx, env, logger)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	opts := []harness.ResumeOption{harness.WithProvider(p), harness.WithDataDir(dir), harness.WithLogger(logger), harness.WithObserver(progress(env.stderr)), cluster}
	if *policyFile != "" {
		raw, err := os.ReadFile(*policyFile)
		if err != nil {
			fail(env.stderr, "policy: %v", err)
			return exitUsage
		}
		pol, err := decodePolicy(raw)
		if err != nil {
			fail(env.stderr, "policy %s: %v", *policyFile, err)
			return exitUsage
		}
		opts = append(opts, harness.WithPolicy(pol))
	}
	fmt.Fprintf(env.stderr, "run %s\n  provider  %s\n  data      %s\n", run, source, dir)
	res, err := harness.Resume(ctx, run, opts...)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && (pe.Code == protocol.CodeUnknownRun || pe.Code == protocol.CodeFenced) {
			fail(env.stderr, "%v", err)
			return exitError
		}
		return reportContractError(env, err)
	}
	return printResult(env, res, *asJSON)
}

// finishedOrUnknown reports, for a resume with no provider to call, a
// finished run's outcome (reported as a resume reports it) or a run the
// data directory does not hold (unknown_run, exit 1); ok is false for a
// run that needs a provider to carry on.
func finishedOrUnknown(ctx context.Context, env *environ, dir, run string, asJSON bool) (int, bool) {
	c, err := harness.Open(ctx, dir)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	h := c.Run(run)
	st, err := h.Status(ctx)
	if errors.Is(err, protocol.ErrUnknownRun) {
		fail(env.stderr, "%v", protocol.Errorf(protocol.CodeUnknownRun, "no run %s in %s; harness ls lists the runs", run, dir))
		return exitError, true
	}
	if err != nil || st.Status != protocol.StatusCompleted && st.Status != protocol.StatusFailed {
		return 0, false
	}
	res, err := h.Wait(ctx)
	if err != nil {
		return 0, false
	}
	return printResult(env, res, asJSON), true
}

// decodePolicy reads a policy file (a contract's "policy" object) as a
// contract's policy is read, so that what is wrong with it is the same
// typed error naming the field (policy.layers[0].rules[1].effect, say).
func decodePolicy(raw []byte) (*protocol.Policy, error) {
	if !json.Valid(raw) {
		return nil, protocol.FieldError(protocol.CodeMalformed, "policy", "write the contract's \"policy\" object alone, as docs/contract.md describes it", "the file is not one JSON object")
	}
	holder, err := json.Marshal(map[string]any{"schema": protocol.ContractSchema, "task": "resume", "workspace": map[string]string{"root": "/"},
		"verification": map[string]any{"none": struct{}{}}, "policy": json.RawMessage(bytes.TrimSpace(raw))})
	if err != nil {
		return nil, err
	}
	c, err := protocol.DecodeContract(holder)
	if err != nil {
		return nil, err
	}
	return c.Policy, nil
}
