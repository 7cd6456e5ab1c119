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
calling the provider. The provider is chosen as for harness run.`)
	data := fs.String("data", "", "data directory (default $HARNESS_DATA or ~/.local/share/harness)")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	replay := fs.String("replay", "", "answer turns from this cassette")
	verbose := fs.Bool("v", false, "log what the roles do to stderr")
	policyFile := fs.String("policy", "", "carry the run on under the policy in this JSON file (the contract's \"policy\" object), recorded as the run's policy")
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
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	opts := []harness.ResumeOption{harness.WithProvider(p), harness.WithDataDir(dir), harness.WithLogger(logger), harness.WithObserver(progress(env.stderr))}
	if *policyFile != "" {
		raw, err := os.ReadFile(*policyFile)
		if err != nil {
			fail(env.stderr, "policy: %v", err)
			return exitUsage
		}
		var pol protocol.Policy
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pol); err != nil {
			fail(env.stderr, "policy %s: %v", *policyFile, err)
			return exitUsage
		}
		opts = append(opts, harness.WithPolicy(&pol))
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
