package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/ioharness/harness/pkg/protocol"
)

// Run runs one contract to its outcome on the embedded default: a NATS
// server with JetStream on the data directory and one coordinator, worker
// and sandboxer in this process. A relative workspace root is taken from
// the working directory, and the sandboxer serves that workspace only.
//
// Errors: a *protocol.Error for a contract that does not validate (nothing
// runs); a cluster that does not start; the context ending before the run
// does (the run stays in the trace and can be resumed). An outcome other
// than success is not an error: read Result.Outcome.
func Run(ctx context.Context, contract *protocol.Contract, opts ...RunOption) (*protocol.Result, error) {
	var cfg Config
	var co callOptions
	for _, o := range opts {
		o.applyRun(&cfg, &co)
	}
	c := *contract
	root, err := localWorkspace(&c.Workspace)
	if err != nil {
		return nil, err
	}
	if err := validate(&c); err != nil {
		return nil, err
	}
	cfg.Roots = []string{root}
	cfg.NoTakeover = true
	cl, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var sub []SubmitOption
	if co.id != "" {
		sub = append(sub, WithRunID(co.id))
	}
	if co.observer != nil {
		sub = append(sub, WithObserver(co.observer))
	}
	if co.flow != nil {
		sub = append(sub, WithFlow(co.flow))
	}
	h, err := cl.Submit(ctx, &c, sub...)
	if err != nil {
		return nil, err
	}
	return h.Wait(ctx)
}

// localWorkspace makes a contract's workspace root, or its single file,
// absolute against the working directory, and returns the directory the
// sandboxer serves: the root, or the file's directory.
func localWorkspace(w *protocol.Workspace) (string, error) {
	if w.File != "" && w.Root == "" && w.Snapshot == "" {
		file, err := filepath.Abs(w.File)
		if err != nil {
			return "", fmt.Errorf("workspace file: %w", err)
		}
		w.File = file
		return filepath.Dir(file), nil
	}
	root, err := filepath.Abs(w.Root)
	if err != nil {
		return "", fmt.Errorf("workspace root: %w", err)
	}
	w.Root = root
	return root, nil
}

// validate checks a contract as a coordinator would, before a cluster is
// started for it.
func validate(c *protocol.Contract) error {
	cc := *c
	if cc.Schema == "" {
		cc.Schema = protocol.ContractSchema
	}
	data, err := json.Marshal(&cc)
	if err != nil {
		return fmt.Errorf("encode contract: %w", err)
	}
	_, err = protocol.DecodeContract(data)
	return err
}

// Resume carries on a run of the data directory whose process was killed
// or interrupted, or that paused for approval, from the step after its
// last committed one, on the embedded default, and returns its outcome.
// The sandboxer serves the run's own workspace. A finished run reports its
// outcome without calling the provider. WithPolicy carries it on under
// another policy; WithDecision records a decision on the action it waits
// for first.
//
// Errors: protocol.ErrUnknownRun for a run the data directory does not
// hold; protocol.ErrFenced while another live process drives it; a damaged
// or too-new trace as a *protocol.Error; with WithDecision, an approval id
// that is not the run's (protocol.ErrInvalidField) or decided otherwise
// (protocol.ErrRunFinished).
func Resume(ctx context.Context, run string, opts ...ResumeOption) (*protocol.Result, error) {
	var cfg Config
	var co callOptions
	for _, o := range opts {
		o.applyResume(&cfg, &co)
	}
	if co.decided {
		if err := approvalOf(run, co.approval); err != nil {
			return nil, err // before anything starts
		}
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	c, err := contractOf(ctx, cfg.DataDir, run)
	if err != nil {
		return nil, err
	}
	cfg.Roots = []string{c.Workspace.Dir()}
	cfg.NoTakeover = true
	cl, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	h := cl.Run(run)
	if err := h.observeWith(&co); err != nil {
		return nil, err
	}
	return h.resume(ctx, &co)
}

// contractOf reads the contract a run of the data directory was started
// with, from its trace, with no role running.
func contractOf(ctx context.Context, dataDir, run string) (*protocol.Contract, error) {
	cl, err := Open(ctx, dataDir)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	c, err := cl.Run(run).Contract(ctx)
	if errors.Is(err, protocol.ErrUnknownRun) {
		return nil, protocol.Errorf(protocol.CodeUnknownRun, "no run %s in %s", run, dataDir)
	}
	return c, err
}
