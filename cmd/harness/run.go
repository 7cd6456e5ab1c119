package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/worker"
)

func cmdRun(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "run", "[flags] CONTRACT.json|DIR",
		`Runs one contract to its outcome on the embedded default: a NATS server with
JetStream on the data directory and one coordinator, worker and sandboxer in
this process. DIR means DIR/contract.json. The run id is printed first;
progress goes to stderr as it happens.

The provider is, in order: --replay FILE; OpenAI (or any OpenAI-compatible
server) when OPENAI_API_KEY is set, with OPENAI_BASE_URL and OPENAI_MODEL
(which overrides the contract's model) if set; else a cassette.json beside
the contract, replayed.`)
	data := fs.String("data", "", "data directory (default $HARNESS_DATA or ~/.local/share/harness)")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	replay := fs.String("replay", "", "answer turns from this cassette")
	record := fs.String("record", "", "record every exchange with the provider to this cassette")
	copyWS := fs.Bool("copy", false, "run on a private copy of the workspace under the data directory; the original stays as it was")
	id := fs.String("id", "", "run id (idempotency key); running again with the same id reports that run")
	verbose := fs.Bool("v", false, "log what the roles do to stderr")
	var roots listFlag
	fs.Var(&roots, "root", "a directory the workspace may lie in (repeatable; default the contract's directory)")
	roles := clusterFlags(env, fs)
	ws := workspaceFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	path, raw, c, snap, err := ws.load(pos[0])
	if err != nil {
		return reportContractError(env, err)
	}
	if snap != nil {
		defer snap.Remove()
		if *copyWS {
			fail(env.stderr, "--copy and --workspace: a snapshot is a copy already; give one of them")
			return exitUsage
		}
	}
	dir := dataDir(env, *data)
	runID := *id
	if runID == "" {
		runID = harness.NewRunID()
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// No TCP port: other harness commands on this data directory reach
	// the run through a unix socket only this user can open, and nothing
	// a sandboxed command can dial reaches the cluster. The backends are
	// built first: no workspace may overlap the programs they run.
	cfg := harness.Config{DataDir: dir, Socket: harness.SocketPath(dir), Logger: logger, NoTakeover: true, MetricsListen: *roles.metrics}
	if err := roles.build(ctx, env, logger, &cfg); err != nil {
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	programs := sandboxer.ProgramDirs(cfg.Backends)
	// A relative workspace is relative to the contract file. A single-file
	// contract's workspace is its file's directory.
	root, where := c.Workspace.Root, ""
	file := c.Workspace.File
	if file != "" {
		root = filepath.Dir(file)
	}
	if snap != nil {
		where = describeSnapshot(*ws.dir, snap)
	} else {
		if !filepath.IsAbs(root) {
			root = filepath.Join(filepath.Dir(path), root)
		}
		if root, err = filepath.Abs(root); err != nil {
			fail(env.stderr, "workspace: %v", err)
			return exitError
		}
		if err := checkRoot(root, served(path, roots), dir, programs); err != nil {
			return reportContractError(env, err)
		}
		if *copyWS && *id != "" && ranBefore(ctx, dir, runID) {
			// The same id again reports that run, which worked on the copy
			// it made then.
			root = filepath.Join(dir, "workspaces", protocol.RunIDFor(runID))
		} else if *copyWS {
			dst := filepath.Join(dir, "workspaces", protocol.RunIDFor(runID))
			if err := sandboxer.RefuseRoot(dst, programs...); err != nil {
				// The data directory lies in (or holds) a program's.
				return reportContractError(env, err)
			}
			if file != "" {
				// One file's run sees that file alone: the copy holds it alone.
				err = copyFile(filepath.Join(root, filepath.Base(file)), filepath.Join(dst, filepath.Base(file)))
			} else {
				err = copyTree(env.stderr, root, dst)
			}
			if err != nil {
				fail(env.stderr, "copy workspace: %v", err)
				return exitError
			}
			root = dst
		}
		ws := map[string]string{"root": root}
		where = root
		if file != "" {
			ws = map[string]string{"file": filepath.Join(root, filepath.Base(file))}
			where = ws["file"]
		}
		if raw, err = withWorkspace(raw, ws); err != nil {
			fail(env.stderr, "%v", err)
			return exitError
		}
	}

	p, source, err := chooseProvider(env, *replay, path)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitUsage
	}
	var rec *provider.Record
	if *record != "" {
		rec = provider.NewRecord(p)
		p = rec
	}
	var approver coordinator.Approver // durable: pause, and say how to decide
	if env.stdin != nil {
		approver = terminalApprover(env)
	}
	cfg.Provider, cfg.Roots, cfg.Approver = p, []string{root}, approver
	cl, err := harness.Start(ctx, cfg)
	if err != nil {
		fail(env.stderr, "start the embedded cluster: %v", err)
		return startFailed(err)
	}
	defer cl.Close()
	release := advertise(dir, cl)
	defer release()
	if snap != nil {
		if err := cl.PutSnapshot(ctx, snap); err != nil {
			fail(env.stderr, "%v", err)
			return exitError
		}
	}

	run := protocol.RunIDFor(runID)
	fmt.Fprintf(env.stderr, "run %s\n", run)
	fmt.Fprintf(env.stderr, "  workspace %s\n  provider  %s\n  data      %s\n", where, source, dir)
	if u := cl.MetricsURL(); u != "" {
		fmt.Fprintf(env.stderr, "  metrics   %s\n", u)
	}
	prog := newProgress(env)
	res, err := runContract(ctx, cl, raw, runID, prog.observe)
	prog.close()
	if rec != nil {
		if serr := rec.Save(*record); serr != nil {
			fail(env.stderr, "save the recording: %v", serr)
		} else {
			fmt.Fprintf(env.stderr, "recorded %d exchange(s) to %s\n", len(rec.Exchanges()), *record)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(env.stderr, "\ninterrupted: run %s stays in the trace as it was; harness resume %s carries it on\n", run, run)
			return exitInterrupted
		}
		return reportContractError(env, err)
	}
	return printResult(env, res, *asJSON)
}

// ranBefore reports whether the data directory holds a run of id.
func ranBefore(ctx context.Context, dir, id string) bool {
	c, err := harness.Open(ctx, dir)
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.Run(protocol.RunIDFor(id)).Status(ctx)
	return err == nil
}

// served are the directories a run's workspace may lie in: those given
// with --root, else the contract's own directory.
func served(contractPath string, roots []string) []string {
	if len(roots) > 0 {
		return roots
	}
	return []string{filepath.Dir(contractPath)}
}

// checkRoot refuses, before anything starts, a workspace root that lies
// outside every served directory, is the file system's root or a system
// directory, or overlaps the data directory or the directory of a program
// the backends run (programs). Errors: a *protocol.Error naming
// workspace.root.
func checkRoot(root string, roots []string, dataDir string, programs []string) error {
	real := root
	if r, err := filepath.EvalSymlinks(root); err == nil {
		real = r
	}
	if err := sandboxer.RefuseRoot(real, append(harness.Reserved(dataDir), programs...)...); err != nil {
		return err
	}
	for _, r := range roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			continue
		}
		if rr, err := filepath.EvalSymlinks(abs); err == nil {
			abs = rr
		}
		if real == abs || strings.HasPrefix(real, strings.TrimSuffix(abs, "/")+"/") {
			return nil
		}
	}
	return protocol.FieldError(protocol.CodeWorkspaceRefused, "workspace.root",
		"put the workspace beside the contract, or name the directory it lies in with --root DIR",
		"the workspace %s is outside the directories this run may serve (%s)", root, strings.Join(roots, ", "))
}

// loadContract reads a contract file, or DIR/contract.json, and decodes it
// strictly. It returns the file's path, its bytes and the contract.
func loadContract(arg string) (string, []byte, *protocol.Contract, error) {
	path := arg
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		path = filepath.Join(arg, "contract.json")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, nil, fmt.Errorf("read contract: %w", err)
	}
	c, err := protocol.DecodeContract(raw)
	if err != nil {
		return "", nil, nil, err
	}
	return path, raw, c, nil
}

// withWorkspace returns the contract with its workspace replaced by ws (a
// root, or a single file), keeping every other field as the user wrote
// it.
func withWorkspace(raw []byte, ws map[string]string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("contract: %w", err)
	}
	b, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	m["workspace"] = b
	return json.Marshal(m)
}

// copyFile copies the regular file src to dst, making dst's directory.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, fi.Mode().Perm())
}

// chooseProvider picks the provider for the embedded run and says which.
func chooseProvider(env *environ, replay, contractPath string) (worker.Provider, string, error) {
	if replay != "" {
		r, err := provider.LoadReplay(replay)
		if err != nil {
			return nil, "", fmt.Errorf("cassette %s: %w", replay, err)
		}
		return r, "replay of " + replay, nil
	}
	if p, _, err := provider.FromEnv(env.getenv); err == nil {
		source := p.Name()
		if env.getenv("OPENAI_API_KEY") != "" {
			source += " (" + orDefault(env.getenv("OPENAI_BASE_URL"), "https://api.openai.com/v1") + ")"
		}
		return p, source, nil
	} else if hasKey(env) {
		return nil, "", err
	}
	cassette := filepath.Join(filepath.Dir(contractPath), "cassette.json")
	if _, err := os.Stat(cassette); contractPath != "" && err == nil {
		r, err := provider.LoadReplay(cassette)
		if err != nil {
			return nil, "", fmt.Errorf("cassette %s: %w", cassette, err)
		}
		return r, "replay of " + cassette + " (set OPENAI_API_KEY for a real model)", nil
	}
	return nil, "", errors.New("no provider: set OPENAI_API_KEY (and OPENAI_BASE_URL for an OpenAI-compatible server), ANTHROPIC_API_KEY or OPENROUTER_API_KEY, or pass --replay CASSETTE")
}

// hasKey reports whether any provider key is set.
func hasKey(env *environ) bool {
	return env.getenv("OPENAI_API_KEY") != "" || env.getenv("ANTHROPIC_API_KEY") != "" || env.getenv("OPENROUTER_API_KEY") != ""
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// reportContractError prints a refused contract or another error and
// returns the exit code.
func reportContractError(env *environ, err error) int {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		fail(env.stderr, "contract refused: %s", pe.Error())
		return exitUsage
	}
	fail(env.stderr, "%v", err)
	if errors.Is(err, errUsage) {
		return exitUsage
	}
	return exitError
}

// progress returns an observer that prints each event as a line.
func progress(w io.Writer) func(*protocol.Event) {
	return func(ev *protocol.Event) { printEvent(w, ev) }
}

// printEvent writes one event of a run as a line of progress.
func printEvent(w io.Writer, ev *protocol.Event) {
	switch ev.Kind {
	case protocol.EventStarted:
		fmt.Fprintf(w, "started: %s\n", oneLine(ev.Text, 100))
	case protocol.EventTurn:
		if t := oneLine(ev.Text, 100); t != "" {
			fmt.Fprintf(w, "step %d  says: %s\n", ev.Step, t)
		}
	case protocol.EventToolCall:
		fmt.Fprintf(w, "step %d  %s %s\n", ev.Step, ev.Tool, oneLine(ev.Target, 80))
	case protocol.EventObserved:
		mark := "→"
		if ev.IsError {
			mark = "✗"
		}
		fmt.Fprintf(w, "        %s %s\n", mark, oneLine(ev.Text, 100))
	case protocol.EventCheck:
		verdict := "failed"
		if ev.Passed != nil && *ev.Passed {
			verdict = "passed"
		}
		fmt.Fprintf(w, "step %d  verification %s: %s\n", ev.Step, verdict, oneLine(ev.Text, 100))
	case protocol.EventStep:
		fmt.Fprintf(w, "step %d  committed (%s, %d tokens so far)\n", ev.Step, ev.Text, ev.Tokens)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// printResult prints a run's result and returns the exit code of its
// outcome.
func printResult(env *environ, res *protocol.Result, asJSON bool) int {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		fmt.Fprintf(env.stdout, "outcome %s after %d step(s), %d tokens: %s\n", res.Outcome, res.Steps, res.Tokens, res.Reason)
		fmt.Fprintf(env.stdout, "trace: harness trace %s\n", res.Run)
		if p := res.Patch; p != nil {
			fmt.Fprintf(env.stdout, "changes: %d file(s) in a %d-byte patch; harness fetch %s [--out DIR]\n", len(p.Files)+p.FilesOmitted, p.Size, res.Run)
			if len(p.Commits) > 0 {
				fmt.Fprintf(env.stdout, "commits: %d made in the run; harness fetch %s --series FILE, for git am\n", len(p.Commits), res.Run)
			}
			if p.Error != nil {
				fmt.Fprintf(env.stdout, "changes: %s\n", p.Error.Message)
			}
		}
		if res.Outcome == protocol.OutcomeAwaitingApproval {
			fmt.Fprintf(env.stdout, "the run is paused and holds nothing; decide with harness approve ID or harness deny ID (ID as above)\n")
		}
	}
	return exitFor(res.Outcome)
}

// exitFor maps an outcome to its documented exit code.
func exitFor(o protocol.Outcome) int {
	switch o {
	case protocol.OutcomeSuccess, protocol.OutcomeFinished:
		return exitOK
	case protocol.OutcomeStepCapReached:
		return exitStepCap
	case protocol.OutcomeTimeBudgetExceeded:
		return exitTime
	case protocol.OutcomeCostBudgetExceeded:
		return exitCost
	case protocol.OutcomeBudgetCeilingReached:
		return exitCeiling
	case protocol.OutcomeAwaitingApproval:
		return exitPaused
	case protocol.OutcomeDenied, protocol.OutcomeRefused:
		return exitDenied
	case protocol.OutcomeStalled:
		return exitStalled
	case protocol.OutcomeEscalatedRetryable, protocol.OutcomeEscalatedTerminal:
		return exitEscalated
	case protocol.OutcomeCancelled:
		return exitCancelled
	case protocol.OutcomeModelRefused:
		return exitModelRefused
	}
	return exitFailed
}

// runContract submits the encoded contract to the embedded cluster under
// the idempotency key id, reports its events to observe, and waits for
// its outcome.
func runContract(ctx context.Context, cl *harness.Cluster, raw []byte, id string, observe func(*protocol.Event)) (*protocol.Result, error) {
	c, err := protocol.DecodeContract(raw)
	if err != nil {
		return nil, err
	}
	h, err := cl.Submit(ctx, c, harness.WithRunID(id), harness.WithObserver(observe))
	if err != nil {
		return nil, err
	}
	return h.Wait(ctx)
}

// startFailed is the exit code of a cluster that did not start: 2 when the
// data directory is another process's or the port is taken (a usage
// error, said at once), else 1.
func startFailed(err error) int {
	if errors.Is(err, protocol.ErrUnavailable) {
		return exitUsage
	}
	return exitError
}
