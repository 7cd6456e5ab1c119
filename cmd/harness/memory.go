package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/memory"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// cmdMemory reads and edits the notes agents keep for their workspaces
// with the remember tool: harness memory ls, rm and clear.
func cmdMemory(ctx context.Context, env *environ, args []string) int {
	if len(args) == 0 {
		memoryUsage(env.stderr)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		memoryUsage(env.stdout)
		return exitOK
	}
	switch args[0] {
	case "ls":
		return memoryLs(ctx, env, args[1:])
	case "rm":
		return memoryRm(ctx, env, args[1:])
	case "clear":
		return memoryClear(ctx, env, args[1:])
	}
	fail(env.stderr, "memory: unknown subcommand %q; use ls, rm or clear (harness memory --help)", args[0])
	return exitUsage
}

func memoryUsage(w io.Writer) {
	fmt.Fprintf(w, `Usage: harness memory SUBCOMMAND [flags]

The notes agents keep for the runs after them with the remember tool, one
set per workspace (at most %d notes of %d characters in all), which each
run starts with. A workspace is a root, as contracts name it, or a snapshot.

Subcommands:
  ls [--workspace ROOT | --snapshot REF]   list a workspace's notes, or without one every workspace that keeps notes
  rm (--workspace ROOT | --snapshot REF) KEY   forget one note
  clear (--workspace ROOT | --snapshot REF)    forget every note of a workspace

Each takes --json, --tenant NAME (a tenant's workspaces are apart from
everyone else's), and --nats or --data to find the cluster.
`, memory.MaxNotes, memory.MaxChars)
}

// memoryFlags are the flags every memory subcommand takes.
type memoryFlags struct {
	at               target
	root, snap, tent *string
	asJSON           *bool
}

func newMemoryFlags(env *environ, name, synopsis, about string) (*flag.FlagSet, *memoryFlags) {
	fs := newFlags(env, "memory "+name, synopsis, about)
	m := &memoryFlags{at: targetFlags(env, fs)}
	m.root = fs.String("workspace", "", "the workspace root, as the contract names it (a relative one is also tried made absolute, as harness run makes it)")
	m.snap = fs.String("snapshot", "", "the workspace snapshot's ref (sha256-...)")
	m.tent = fs.String("tenant", "", "the tenant whose workspace it is (default the runs submitted on harness.submit itself)")
	m.asJSON = fs.Bool("json", false, "print JSON on stdout")
	return fs, m
}

// workspace returns the workspace the flags name, whether they name one,
// or what is wrong with them.
func (m *memoryFlags) workspace() (protocol.Workspace, bool, error) {
	switch {
	case *m.root != "" && *m.snap != "":
		return protocol.Workspace{}, false, errors.New("give --workspace or --snapshot, not both")
	case *m.snap != "" && !protocol.ValidSnapshotRef(*m.snap):
		return protocol.Workspace{}, false, fmt.Errorf("--snapshot %q is not a snapshot ref: \"sha256-\" and 64 hex digits, as harness submit --workspace printed", *m.snap)
	case *m.tent != "" && !wire.ValidTenant(*m.tent):
		return protocol.Workspace{}, false, fmt.Errorf("--tenant %q is not a tenant name: 1 to 32 lowercase letters and digits", *m.tent)
	case *m.snap != "":
		return protocol.Workspace{Snapshot: *m.snap}, true, nil
	case *m.root != "":
		return protocol.Workspace{Root: *m.root}, true, nil
	}
	return protocol.Workspace{}, false, nil
}

// open connects to the cluster and returns the store of the tenant's
// workspaces, and the function that closes it; on failure it says why on
// stderr and returns the exit code.
func (m *memoryFlags) open(ctx context.Context, env *environ) (*memory.Store, func(), int) {
	c, closeFn, code := m.at.connect(ctx, env)
	if c == nil {
		return nil, nil, code
	}
	js, err := jetstream.New(c.Conn())
	var kv jetstream.KeyValue
	if err == nil {
		kv, err = js.KeyValue(ctx, wire.BucketMemory)
	}
	if err != nil {
		closeFn()
		fail(env.stderr, "open the %s bucket: %v", wire.BucketMemory, err)
		return nil, nil, exitError
	}
	return memory.New(kv).Tenant(*m.tent), closeFn, exitOK
}

// name is a workspace's identity as the store keeps it.
func (m *memoryFlags) name(ws protocol.Workspace) string {
	if *m.tent != "" {
		return "tenant:" + *m.tent + "/" + memory.Identity(ws)
	}
	return memory.Identity(ws)
}

// memoryResolve returns ws and its notes; for a relative root without notes,
// the root made absolute against the working directory, as harness run
// makes a contract's, when that one has notes.
func memoryResolve(ctx context.Context, s *memory.Store, ws protocol.Workspace) (protocol.Workspace, []protocol.Note, error) {
	notes, err := s.List(ctx, ws)
	if err != nil || len(notes) > 0 || ws.Root == "" || filepath.IsAbs(ws.Root) {
		return ws, notes, err
	}
	abs, aerr := filepath.Abs(ws.Root)
	if aerr != nil {
		return ws, nil, nil
	}
	absWS := protocol.Workspace{Root: abs}
	if absNotes, err := s.List(ctx, absWS); err == nil && len(absNotes) > 0 {
		return absWS, absNotes, nil
	}
	return ws, nil, nil
}

func memoryLs(ctx context.Context, env *environ, args []string) int {
	fs, m := newMemoryFlags(env, "ls", "[--workspace ROOT | --snapshot REF] [flags]",
		`Lists a workspace's notes, oldest first: key, age, the run and step that
wrote it, and the value's start. Without a workspace, lists every workspace
that keeps notes, with how many and their characters.`)
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 0 {
		fs.Usage()
		return exitUsage
	}
	ws, given, err := m.workspace()
	if err != nil {
		fail(env.stderr, "memory ls: %v", err)
		return exitUsage
	}
	s, closeFn, code := m.open(ctx, env)
	if s == nil {
		return code
	}
	defer closeFn()
	if !given {
		sums, err := s.Workspaces(ctx)
		if err != nil {
			fail(env.stderr, "%v", err)
			return exitError
		}
		if *m.asJSON {
			if sums == nil {
				sums = []memory.Summary{}
			}
			memoryJSON(env.stdout, sums)
			return exitOK
		}
		if len(sums) == 0 {
			fmt.Fprintln(env.stderr, "no workspace keeps notes")
			return exitOK
		}
		w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "WORKSPACE\tNOTES\tCHARS")
		for _, sum := range sums {
			fmt.Fprintf(w, "%s\t%d\t%d\n", sum.Workspace, sum.Notes, sum.Chars)
		}
		_ = w.Flush()
		return exitOK
	}
	ws, notes, err := memoryResolve(ctx, s, ws)
	if err != nil {
		fail(env.stderr, "%v", err)
		return exitError
	}
	if *m.asJSON {
		if notes == nil {
			notes = []protocol.Note{}
		}
		memoryJSON(env.stdout, struct {
			Workspace string          `json:"workspace"`
			Notes     []protocol.Note `json:"notes"`
		}{m.name(ws), notes})
		return exitOK
	}
	if len(notes) == 0 {
		fmt.Fprintf(env.stderr, "no notes are kept for %s (harness memory ls lists the workspaces that keep notes)\n", m.name(ws))
		return exitOK
	}
	now := time.Now()
	w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tAGE\tRUN\tSTEP\tVALUE")
	chars := 0
	for _, n := range notes {
		chars += utf8.RuneCountInString(n.Value)
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", oneLine(n.Key, 40), age(now.Sub(n.Time)), orDash(n.Run), n.Step, oneLine(n.Value, 60))
	}
	_ = w.Flush()
	fmt.Fprintf(env.stderr, "%d of %d notes, %d of %d characters, kept for %s\n", len(notes), memory.MaxNotes, chars, memory.MaxChars, m.name(ws))
	return exitOK
}

// memoryNamed parses a subcommand that edits one workspace's notes: its flags,
// the workspace, which is required, and the positionals, of which it
// takes want. ok is false with the exit code when they do not fit.
func memoryNamed(env *environ, fs *flag.FlagSet, m *memoryFlags, args []string, want int) (protocol.Workspace, []string, int, bool) {
	pos, err := parse(fs, args)
	if err != nil {
		return protocol.Workspace{}, nil, exitForParse(err), false
	}
	ws, ok, err := m.workspace()
	switch {
	case err != nil:
		fail(env.stderr, "%s: %v", fs.Name(), err)
	case !ok:
		fail(env.stderr, "%s: name the workspace with --workspace ROOT or --snapshot REF (harness memory ls lists those that keep notes)", fs.Name())
	case len(pos) != want:
		fs.Usage()
	default:
		return ws, pos, exitOK, true
	}
	return protocol.Workspace{}, nil, exitUsage, false
}

// memoryTarget is memoryNamed, then the store opened and the workspace
// resolved as ls resolves it: what rm and clear edit. The caller closes
// the store with closeFn when s is not nil; otherwise code is the exit.
func memoryTarget(ctx context.Context, env *environ, fs *flag.FlagSet, m *memoryFlags, args []string, want int) (s *memory.Store, ws protocol.Workspace, pos []string, closeFn func(), code int) {
	ws, pos, code, ok := memoryNamed(env, fs, m, args, want)
	if !ok {
		return nil, ws, nil, nil, code
	}
	s, closeFn, code = m.open(ctx, env)
	if s == nil {
		return nil, ws, nil, nil, code
	}
	ws, _, err := memoryResolve(ctx, s, ws)
	if err != nil {
		closeFn()
		return nil, ws, nil, nil, memoryError(env, err)
	}
	return s, ws, pos, closeFn, exitOK
}

// memoryError reports err and returns its exit code: a usage error for a
// key or workspace that has no notes, an error otherwise.
func memoryError(env *environ, err error) int {
	fail(env.stderr, "%v", err)
	if errors.Is(err, protocol.ErrNotFound) || errors.Is(err, protocol.ErrBadArguments) {
		return exitUsage
	}
	return exitError
}

func memoryRm(ctx context.Context, env *environ, args []string) int {
	fs, m := newMemoryFlags(env, "rm", "(--workspace ROOT | --snapshot REF) [flags] KEY",
		`Forgets the note under KEY in a workspace's memory. A key it does not keep
is an error naming the keys it does.`)
	s, ws, pos, closeFn, code := memoryTarget(ctx, env, fs, m, args, 1)
	if s == nil {
		return code
	}
	defer closeFn()
	if err := s.Delete(ctx, ws, pos[0]); err != nil {
		return memoryError(env, err)
	}
	if *m.asJSON {
		memoryJSON(env.stdout, struct {
			Workspace string `json:"workspace"`
			Removed   string `json:"removed"`
		}{m.name(ws), pos[0]})
		return exitOK
	}
	fmt.Fprintf(env.stdout, "forgot %q of %s\n", pos[0], m.name(ws))
	return exitOK
}

func memoryClear(ctx context.Context, env *environ, args []string) int {
	fs, m := newMemoryFlags(env, "clear", "(--workspace ROOT | --snapshot REF) [flags]",
		`Forgets every note of a workspace. A workspace that keeps none is an error,
for a mistyped root.`)
	s, ws, _, closeFn, code := memoryTarget(ctx, env, fs, m, args, 0)
	if s == nil {
		return code
	}
	defer closeFn()
	n, err := s.Clear(ctx, ws)
	if err != nil {
		return memoryError(env, err)
	}
	if n == 0 {
		return memoryError(env, protocol.FieldError(protocol.CodeNotFound, "workspace", "harness memory ls lists the workspaces that keep notes",
			"no notes are kept for %s", m.name(ws)))
	}
	if *m.asJSON {
		memoryJSON(env.stdout, struct {
			Workspace string `json:"workspace"`
			Cleared   int    `json:"cleared"`
		}{m.name(ws), n})
		return exitOK
	}
	fmt.Fprintf(env.stdout, "forgot the %d notes of %s\n", n, m.name(ws))
	return exitOK
}

func memoryJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
