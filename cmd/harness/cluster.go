package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/console"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/worker"
)

func cmdUp(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "up", "[flags]",
		`Runs a whole cluster in this process (a NATS server with JetStream, one
coordinator, worker and sandboxer) listening on a NATS port, and prints the
URL clients connect to. Stops on SIGINT or SIGTERM; runs in hand stay in the
trace.

Every connection authenticates, as user admin with a password made afresh at
each start and written, readable by you alone, to DATA/server.json (which the
harness commands given the same --data, or NATS_URL naming this server, read
by themselves) and DATA/nats.env (NATS_URL, NATS_USER and NATS_PASSWORD, for
the nats CLI: set -a; . DATA/nats.env; set +a).

--console ADDR also serves the web console there, connected as its own
NATS user (console), with the login tokens of --token-file (harness console
--help says more).

The worker's provider is --replay FILE, or every vendor whose key is set
(OPENAI_API_KEY, ANTHROPIC_API_KEY, OPENROUTER_API_KEY), chained in the
order HARNESS_PROVIDERS gives, falling over on retryable failures.`)
	data := fs.String("data", "", "data directory (default $HARNESS_DATA or ~/.local/share/harness)")
	listen := fs.String("listen", "127.0.0.1:4222", "host:port NATS listens on (port 0 for a free one)")
	replay := fs.String("replay", "", "answer turns from this cassette")
	var roots listFlag
	fs.Var(&roots, "root", "a directory whose workspaces the sandboxer serves (repeatable; default the working directory)")
	verbose := fs.Bool("v", false, "log what the roles do to stderr")
	redisURL := fs.String("redis", env.getenv("REDIS_URL"), "Redis URL of the budget ledger ($REDIS_URL; default a ledger in this process, rebuilt from the trace after a restart)")
	maxRuns := fs.Int("max-runs", 0, "runs the coordinator works on at once; a run waiting on a model, a person, a sub-agent or a timer takes none (default 64)")
	concurrency := fs.Int("concurrency", 0, "provider calls the worker makes at once (default 256)")
	retention := fs.Duration("retention", 0, "how long a finished run's trace, index entry, approvals and cancel are kept; negative keeps them for ever (default 720h, 30 days)")
	roles := clusterFlags(env, fs)
	consoleAt := fs.String("console", "", "also serve the web console on host:port (harness console --help; requires --token-file)")
	cf := addConsoleFlags(fs)
	if pos, err := parse(fs, args); err != nil {
		return exitForParse(err)
	} else if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	var tokens *console.Tokens
	if *consoleAt != "" {
		var err error
		if tokens, err = cf.load(); err != nil {
			fail(env.stderr, "--console: %v", err)
			return exitUsage
		}
	} else if *cf.tokenFile != "" {
		fail(env.stderr, "--token-file is the console's: give --console ADDR too")
		return exitUsage
	}
	var p worker.Provider
	switch {
	case *replay != "":
		r, err := provider.LoadReplay(*replay)
		if err != nil {
			fail(env.stderr, "cassette %s: %v", *replay, err)
			return exitUsage
		}
		p = r
	default:
		chain, _, err := provider.FromEnv(env.getenv)
		if err != nil {
			failErr(env.stderr, err)
			return exitUsage
		}
		p = chain
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	dir := dataDir(env, *data)
	logger := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
	cfg := harness.Config{DataDir: dir, Listen: *listen, Provider: p, Roots: roots, Logger: logger, MetricsListen: *roles.metrics, Retention: *retention,
		MaxRuns: *maxRuns, Concurrency: *concurrency}
	if err := roles.build(ctx, env, logger, &cfg); err != nil {
		failErr(env.stderr, err)
		return exitUsage
	}
	if err := sandboxer.CheckRoots(roots, append(harness.Reserved(dir), sandboxer.ProgramDirs(cfg.Backends)...)); err != nil {
		fail(env.stderr, "--root: %v", err)
		return exitUsage
	}
	led, closeLedger, err := ledger.Dial(ctx, *redisURL, ledger.RedisConfig{})
	if err != nil {
		failErr(env.stderr, err)
		return exitError
	}
	defer func() { _ = closeLedger() }()
	cfg.Ledger = led
	cl, err := harness.Start(ctx, cfg)
	if err != nil {
		fail(env.stderr, "start the cluster: %v", err)
		return startFailed(err)
	}
	release := advertise(dir, cl)
	user, _ := cl.Credentials()
	fmt.Fprintf(env.stdout, "NATS URL: %s\n", cl.URL())
	fmt.Fprintf(env.stdout, "user:     %s (its password, made at this start, is in %s)\n", user, filepath.Join(dir, "server.json"))
	fmt.Fprintf(env.stdout, "data:     %s\n", dir)
	if u := cl.MetricsURL(); u != "" {
		fmt.Fprintf(env.stdout, "metrics:  %s\n", u)
	}
	fmt.Fprintf(env.stdout, "submit:   harness submit --data %s CONTRACT --wait\n", dir)
	fmt.Fprintf(env.stdout, "nats CLI: set -a; . %s; set +a\n", filepath.Join(dir, "nats.env"))
	code := exitOK
	if tokens != nil {
		cc, err := cl.ConsoleClient(ctx)
		if err != nil {
			fail(env.stderr, "console: %v", err)
			code = exitError
		} else {
			code = serveConsole(ctx, env, cc, tokens, *consoleAt, cf, logger)
			cc.Close()
		}
	}
	if code == exitOK {
		<-ctx.Done()
	}
	release()
	if err := cl.Close(); err != nil {
		failErr(env.stderr, err)
		return exitError
	}
	return code
}

func cmdSubmit(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "submit", "[flags] CONTRACT.json|DIR",
		`Submits a contract to a cluster (--nats, $NATS_URL, or the harness process
serving the data directory) and prints the run id. With --wait it prints the
run's progress and exits with its outcome's code. A relative workspace root
is resolved by the sandboxer against its base directory. --workspace DIR
uploads DIR as a snapshot instead, which any sandboxer materialises; the
run's changes come back with harness fetch RUN. --skills DIR uploads a
directory of skills as a snapshot of its own and makes it the contract's
skills (skills.snapshot); the sandboxer keeps it apart from the workspace,
and the policy judges a read of one as the read of skills/ and its path in
DIR.`)
	natsURL := fs.String("nats", "", "NATS URL of the cluster (default $NATS_URL)")
	env.nats = streams.AuthFlags(fs, env.getenv)
	data := fs.String("data", "", "data directory to find a local cluster in")
	wait := fs.Bool("wait", false, "wait for the outcome")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	id := fs.String("id", "", "idempotency key; submitting again with it returns the same run")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for a coordinator to accept the contract")
	ws := workspaceFlags(fs)
	skillsDir := fs.String("skills", "", "carry this directory of skills (NAME.md, NAME/SKILL.md) as a snapshot of its own, as the contract's skills.snapshot")
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	_, _, contract, snap, err := ws.load(pos[0])
	if err != nil {
		return reportContractError(env, err)
	}
	if snap != nil {
		defer snap.Remove()
	}
	skills, err := withSkills(contract, *skillsDir)
	if err != nil {
		return reportContractError(env, err)
	}
	if skills != nil {
		defer skills.Remove()
	}
	c, closeFn, err := client(ctx, env, *natsURL, dataDir(env, *data))
	if err != nil {
		failErr(env.stderr, err)
		return exitError
	}
	defer closeFn()
	if snap != nil {
		if err := c.PutSnapshot(ctx, snap); err != nil {
			failErr(env.stderr, err)
			return exitError
		}
		fmt.Fprintf(env.stderr, "workspace   %s\n", describeSnapshot(*ws.dir, snap))
	}
	if skills != nil {
		if err := c.PutSnapshot(ctx, skills); err != nil {
			failErr(env.stderr, err)
			return exitError
		}
		fmt.Fprintf(env.stderr, "skills      %s\n", describeSnapshot(*skillsDir, skills))
	}
	opts := []harness.SubmitOption{harness.WithRunID(cmp.Or(*id, harness.NewRunID()))}
	if *wait {
		prog := newProgress(env)
		defer prog.close()
		opts = append(opts, harness.WithObserver(prog.observe))
	}
	sctx, cancel := context.WithTimeout(ctx, *timeout)
	h, err := c.Submit(sctx, contract, opts...)
	cancel()
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(env.stderr, "\ninterrupted before a coordinator answered: %v\n", err)
		return exitInterrupted
	}
	if err != nil {
		return reportContractError(env, err)
	}
	run := h.ID()
	if !*wait {
		if *asJSON {
			_ = json.NewEncoder(env.stdout).Encode(map[string]string{"run": run})
		} else {
			fmt.Fprintln(env.stdout, run)
		}
		return exitOK
	}
	fmt.Fprintf(env.stderr, "run %s\n", run)
	res, err := h.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(env.stderr, "\ndetached from run %s; it goes on (harness status %s, harness trace --follow %s)\n", run, run, run)
		return exitInterrupted
	}
	if err != nil {
		fail(env.stderr, "wait for run %s: %v", run, err)
		return exitError
	}
	return printResult(env, res, *asJSON)
}

// readRun is the shape of the commands that read one run: parse the
// flags, connect to the cluster or the data directory, then show.
func readRun(ctx context.Context, env *environ, args []string, name, about, jsonHelp string,
	show func(c *harness.Client, run string, asJSON bool) int, more ...func(*flag.FlagSet)) int {
	fs := newFlags(env, name, "[flags] RUN", about)
	for _, m := range more {
		m(fs)
	}
	at := targetFlags(env, fs)
	asJSON := fs.Bool("json", false, jsonHelp)
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	c, closeFn, code := at.connect(ctx, env)
	if c == nil {
		return code
	}
	defer closeFn()
	return show(c, pos[0], *asJSON)
}

func cmdStatus(ctx context.Context, env *environ, args []string) int {
	return readRun(ctx, env, args, "status", "Shows where a run stands: its status, outcome, steps and tokens.", "print the state as JSON",
		func(c *harness.Client, run string, asJSON bool) int {
			st, err := c.Run(run).Status(ctx)
			if err != nil {
				failErr(env.stderr, err)
				return exitError
			}
			if asJSON {
				enc := json.NewEncoder(env.stdout)
				enc.SetIndent("", "  ")
				_ = enc.Encode(st)
				return exitOK
			}
			w := env.stdout
			fmt.Fprintf(w, "run      %s\nstatus   %s\n", st.Run, st.Status)
			if st.Outcome != "" {
				fmt.Fprintf(w, "outcome  %s\n", st.Outcome)
			}
			fmt.Fprintf(w, "steps    %d\ntokens   %d\n", st.Step, st.Tokens)
			if st.CostMicros > 0 {
				fmt.Fprintf(w, "cost     %d micro-units\n", st.CostMicros)
			}
			printUsage(w, st.Usage)
			printBudgets(w, st)
			fmt.Fprintf(w, "task     %s\nstarted  %s\nupdated  %s\n",
				oneLine(st.Task, 100), st.Started.Format(time.RFC3339), st.Updated.Format(time.RFC3339))
			if st.Reason != "" {
				fmt.Fprintf(w, "reason   %s\n", st.Reason)
			}
			if st.Coordinator != "" {
				fmt.Fprintf(w, "owner    %s\n", st.Coordinator)
			}
			if st.Status == protocol.StatusRunning {
				if hint := servingHint(ctx, c, st); hint != "" {
					fmt.Fprintf(w, "waiting  %s\n", hint)
				}
			}
			return exitOK
		})
}

// printBudgets shows what the run and its agent tree spent against their
// ceilings, as of the run's last draw.
func printBudgets(w io.Writer, st *protocol.RunState) {
	b := st.Budgets
	if b == nil {
		return
	}
	fmt.Fprintf(w, "spent    %s\n", b.Run)
	if b.RunRemaining != nil {
		fmt.Fprintf(w, "left     %s\n", b.RunRemaining)
	}
	if st.Parent != "" {
		fmt.Fprintf(w, "tree     %s (depth %d, parent %s)\n", b.Tree, b.Depth, st.Parent)
	} else {
		fmt.Fprintf(w, "tree     %s (root)\n", b.Tree)
	}
	if b.TreeRemaining != nil {
		fmt.Fprintf(w, "  spent  %s\n  held   %s\n  left   %s\n", b.TreeSpent, b.TreeReserved, b.TreeRemaining)
	}
}

func cmdTrace(ctx context.Context, env *environ, args []string) int {
	var follow *bool
	var turn *int
	var flags *flag.FlagSet
	return readRun(ctx, env, args, "trace", "Shows the durable trace of a run, finished or not, record by record; with --follow (-f), then each record as it is committed, until the run finishes; with --turn N, exactly what the model was sent at step N.", "print the records as JSON, one per line (with --turn, the request)",
		func(c *harness.Client, run string, asJSON bool) int {
			asked := false // --turn given, 0 included, which is no step
			flags.Visit(func(f *flag.Flag) { asked = asked || f.Name == "turn" })
			if asked {
				return showTurn(ctx, env, c, run, *turn, asJSON)
			}
			if *follow {
				enc := json.NewEncoder(env.stdout)
				err := c.Run(run).Follow(ctx, func(rec *protocol.Record) {
					if asJSON {
						_ = enc.Encode(rec)
					} else {
						writeRecord(env.stdout, rec)
					}
				})
				switch {
				case err != nil && ctx.Err() != nil:
					fmt.Fprintf(env.stderr, "\nstopped following run %s; it goes on\n", run)
					return exitInterrupted
				case err != nil:
					failErr(env.stderr, err)
					return exitError
				}
				return exitOK
			}
			recs, err := c.Run(run).Trace(ctx)
			if err != nil {
				failErr(env.stderr, err)
				return exitError
			}
			if asJSON {
				enc := json.NewEncoder(env.stdout)
				for i := range recs {
					_ = enc.Encode(&recs[i])
				}
				return exitOK
			}
			for i := range recs {
				writeRecord(env.stdout, &recs[i])
			}
			return exitOK
		}, func(fs *flag.FlagSet) {
			flags = fs
			follow = fs.Bool("follow", false, "then print each record as it is committed, until the run finishes")
			fs.BoolVar(follow, "f", false, "short for --follow")
			turn = fs.Int("turn", 0, "show exactly what the model was sent at step `N`: the assembled request, and how it was fitted")
		})
}

// showTurn prints what the model was sent at one step: with asJSON the
// request and its assembly as one JSON object, else the messages as text.
func showTurn(ctx context.Context, env *environ, c *harness.Client, run string, step int, asJSON bool) int {
	if step < 1 {
		fail(env.stderr, "--turn %d: give a step number, 1 or more", step)
		return exitUsage
	}
	req, asm, err := c.Run(run).Request(ctx, step)
	if err != nil {
		failErr(env.stderr, err)
		return exitError
	}
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Request  *protocol.CompletionRequest `json:"request"`
			Assembly *protocol.Assembly          `json:"assembly"`
		}{req, asm})
		return exitOK
	}
	w := env.stdout
	fmt.Fprintf(w, "step %d of %s: %d messages, %d tools; about %d of %d tokens (the provider counted %d)\n",
		step, run, len(req.Messages), len(req.Tools), asm.Estimate, asm.Budget, asm.Reported)
	fmt.Fprintf(w, "carried %d, stubbed %d, superseded %d, re-read %d, steps collapsed %d, notes %d\n\n",
		asm.Carried, asm.Stubbed, asm.Superseded, asm.Reread, asm.Collapsed, asm.Notes)
	fmt.Fprintf(w, "[system]\n%s\n\n", req.System)
	for _, m := range req.Messages {
		switch {
		case m.Role == protocol.RoleTool:
			fmt.Fprintf(w, "[tool result %s]\n%s\n\n", m.ToolCallID, m.Content)
		default:
			fmt.Fprintf(w, "[%s]\n", m.Role)
			for _, th := range m.Thinking {
				if th.Text != "" {
					fmt.Fprintf(w, "(thinking) %s\n", th.Text)
				} else {
					fmt.Fprintf(w, "(%s block, sent back unchanged)\n", th.Kind)
				}
			}
			if m.Content != "" {
				fmt.Fprintf(w, "%s\n", m.Content)
			}
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(w, "-> %s %s %s\n", tc.ID, tc.Name, tc.Arguments)
			}
			if len(m.Images) > 0 {
				fmt.Fprintf(w, "(%d image(s))\n", len(m.Images))
			}
			fmt.Fprintln(w)
		}
	}
	return exitOK
}

// writeRecord renders one trace record as readable text.
func writeRecord(w interface{ Write([]byte) (int, error) }, r *protocol.Record) {
	t := r.Time.Format("15:04:05.000")
	switch r.Kind {
	case protocol.RecordStarted:
		fmt.Fprintf(w, "%s started run %s\n", t, r.Run)
		if c := r.Contract; c != nil {
			ws := c.Workspace.Root
			if c.Workspace.File != "" {
				ws = c.Workspace.File + " (one file)"
			}
			fmt.Fprintf(w, "    task: %s\n    workspace: %s\n    verification: %s\n    budget: %d steps",
				oneLine(c.Task, 200), ws, c.Verification.Kind(), c.Budget.MaxSteps)
			if c.Budget.MaxWall > 0 {
				fmt.Fprintf(w, ", %s", time.Duration(c.Budget.MaxWall))
			}
			if c.Budget.MaxTokens > 0 {
				fmt.Fprintf(w, ", %d tokens", c.Budget.MaxTokens)
			}
			fmt.Fprintln(w)
		}
	case protocol.RecordStep:
		fmt.Fprintf(w, "%s step %d (%d tokens in all)\n", t, r.Step, r.Tokens)
		if r.Turn != nil {
			if r.Turn.Text != "" {
				fmt.Fprintf(w, "    says: %s\n", oneLine(r.Turn.Text, 300))
			}
			for i, call := range r.Turn.ToolCalls {
				fmt.Fprintf(w, "    call %s %s\n", call.Name, oneLine(string(call.Arguments), 200))
				if i < len(r.Observations) {
					o := r.Observations[i]
					mark := "→"
					if o.IsError {
						mark = "✗"
					}
					for _, line := range strings.Split(strings.TrimRight(o.Content, "\n"), "\n")[:min(8, lineCount(o.Content))] {
						fmt.Fprintf(w, "      %s %s\n", mark, line)
						mark = " "
					}
					if n := lineCount(o.Content); n > 8 {
						fmt.Fprintf(w, "        …%d more line(s); --json shows all\n", n-8)
					}
				}
			}
		}
		if r.Check != nil {
			v := "failed"
			if r.Check.Passed {
				v = "passed"
			}
			fmt.Fprintf(w, "    verification %s: %s\n", v, r.Check.Detail)
		}
	case protocol.RecordFinished:
		fmt.Fprintf(w, "%s finished: %s after %d step(s), %d tokens: %s\n", t, r.Outcome, r.Step, r.Tokens, r.Reason)
		if p := r.Patch; p != nil {
			fmt.Fprintf(w, "    changes: %d file(s), a %d-byte patch (harness fetch %s)\n", len(p.Files)+p.FilesOmitted, p.Size, r.Run)
			if len(p.Commits) > 0 {
				fmt.Fprintf(w, "    commits: %d, a patch series (harness fetch --series FILE %s)\n", len(p.Commits), r.Run)
			}
			if p.Error != nil {
				fmt.Fprintf(w, "    changes: %s\n", p.Error.Message)
			}
		}
	default:
		fmt.Fprintf(w, "%s %s\n", t, r.Kind)
	}
}

func lineCount(s string) int {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// servingHint says why a running run may be making no progress: no worker
// serves its pool, or no sandboxer has its backend; "" when the fleet can
// serve it.
func servingHint(ctx context.Context, c *harness.Client, st *protocol.RunState) string {
	backend := ""
	if ct, err := c.Run(st.Run).Contract(ctx); err == nil {
		backend = ct.Sandbox.Backend
	}
	fleet, err := c.Fleet(ctx, 300*time.Millisecond)
	if err != nil {
		return ""
	}
	return harness.Serving(fleet, st.Pool, backend)
}

// printUsage shows what a run's turns reported beyond their tokens: the
// input read from and written to the providers' caches, the reasoning
// among the output, and the providers' own cost.
func printUsage(w io.Writer, u *protocol.Usage) {
	if u == nil {
		return
	}
	fmt.Fprintf(w, "input    %d (%d cached, %d written to the cache)\noutput   %d", u.InputTokens, u.CachedTokens, u.CacheWriteTokens, u.OutputTokens)
	if u.ReasoningTokens > 0 {
		fmt.Fprintf(w, " (%d reasoning)", u.ReasoningTokens)
	}
	fmt.Fprintln(w)
	if u.ReportedCost > 0 {
		fmt.Fprintf(w, "reported %.6f (the provider's own cost)\n", u.ReportedCost)
	}
}
