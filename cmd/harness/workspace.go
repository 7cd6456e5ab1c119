package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/snapshot"
	"github.com/ioharness/harness/pkg/tools"
)

// wsFlags carry a workspace with the contract, as a snapshot (run,
// submit).
type wsFlags struct {
	dir     *string
	commit  *string
	exclude listFlag
}

func workspaceFlags(fs *flag.FlagSet) *wsFlags {
	w := &wsFlags{
		dir:    fs.String("workspace", "", "carry this directory to the sandboxer as a snapshot, instead of the contract's workspace.root; the run's changes come back with harness fetch"),
		commit: fs.String("commit", "", "with --workspace: commit the run's changes with git in the materialised workspace, with this message"),
	}
	fs.Var(&w.exclude, "exclude", "with --workspace: leave out entries whose name or path matches this glob (repeatable: --exclude .git --exclude node_modules)")
	return w
}

// load reads the contract at arg (a file, or DIR/contract.json). With
// --workspace it packs the directory and makes the contract's workspace
// that snapshot, keeping a commit request the contract makes, before
// decoding it strictly. The caller removes the snapshot once uploaded.
func (w *wsFlags) load(arg string) (string, []byte, *protocol.Contract, *harness.Snapshot, error) {
	if *w.dir == "" {
		if *w.commit != "" || len(w.exclude) > 0 {
			return "", nil, nil, nil, fmt.Errorf("%w: --commit and --exclude go with --workspace DIR", errUsage)
		}
		path, raw, c, err := loadContract(arg)
		return path, raw, c, nil, err
	}
	path := arg
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		path = filepath.Join(arg, "contract.json")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, nil, nil, fmt.Errorf("read contract: %w", err)
	}
	snap, err := harness.PackSnapshot(*w.dir, snapshot.PackOptions{Exclude: w.exclude})
	if err != nil {
		return "", nil, nil, nil, err
	}
	raw, err = withSnapshot(raw, snap.Ref, *w.commit)
	if err == nil {
		var c *protocol.Contract
		if c, err = protocol.DecodeContract(raw); err == nil {
			return path, raw, c, snap, nil
		}
	}
	_ = snap.Remove()
	return "", nil, nil, nil, err
}

// withSnapshot returns the contract with its workspace replaced by the
// snapshot ref, keeping every other field as the user wrote it, and the
// workspace's commit request (or --commit's).
func withSnapshot(raw []byte, ref, commit string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, protocol.FieldError(protocol.CodeMalformed, "", "send one JSON object as described in docs/contract.md", "contract is not valid JSON: %s", err.Error())
	}
	ws := map[string]any{"snapshot": ref}
	var old map[string]json.RawMessage
	if json.Unmarshal(m["workspace"], &old) == nil && old["commit"] != nil {
		ws["commit"] = old["commit"]
	}
	if commit != "" {
		ws["commit"] = protocol.CommitSpec{Message: commit}
	}
	b, err := json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	m["workspace"] = b
	return json.Marshal(m)
}

// withSkills packs the directory dir (--skills) and makes the contract's
// skills that snapshot, replacing what the contract names, and checks
// the contract again (a single-file contract takes no skills). It
// returns nil, and leaves the contract as it is, for no dir. The caller
// removes the snapshot once uploaded. Errors: an unreadable dir, those of
// harness.PackSnapshot, the contract's refusal.
func withSkills(c *protocol.Contract, dir string) (*harness.Snapshot, error) {
	if dir == "" {
		return nil, nil
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: --skills names a directory of skills (NAME.md, NAME/SKILL.md); %s is none", errUsage, dir)
	}
	snap, err := harness.PackSnapshot(dir, snapshot.PackOptions{})
	if err != nil {
		return nil, err
	}
	c.Skills = &protocol.SkillsSpec{Snapshot: snap.Ref}
	if err := c.Validate(); err != nil {
		_ = snap.Remove()
		return nil, err
	}
	return snap, nil
}

// describeSnapshot says what was packed, and what was left out.
func describeSnapshot(dir string, s *harness.Snapshot) string {
	d := fmt.Sprintf("snapshot of %s (%d entries, %d bytes packed to %d)\n            %s", dir, s.Info.Files, s.Info.Bytes, s.Size, s.Ref)
	for _, l := range s.Info.LeftOut {
		d += fmt.Sprintf("\n            left out %s: %s", l.Path, l.Reason)
	}
	return d
}

func cmdFetch(ctx context.Context, env *environ, args []string) int {
	fs := newFlags(env, "fetch", "[flags] RUN",
		`Writes what a finished run changed in its snapshot workspace (harness submit
--workspace, harness run --workspace): a unified diff of its text files, with
binary files, symbolic links and special files listed but not carried. The
diff goes to stdout, or to --patch FILE; --out DIR applies it to DIR (the
directory that was uploaded, or a copy of it), all or nothing: a change that
does not apply leaves DIR as it was. The commits the run made in the
workspace's repository (the agent's git_commit, and --commit's) come back
beside the diff as a patch series: --series FILE writes it ("-": stdout,
instead of the diff), for git am in the repository the snapshot was made
of. A summary, commits included, goes to stderr.`)
	natsURL := fs.String("nats", "", "NATS URL of the cluster (default $NATS_URL)")
	env.nats = streams.AuthFlags(fs, env.getenv)
	data := fs.String("data", "", "data directory")
	out := fs.String("out", "", "apply the changes to this directory")
	patchFile := fs.String("patch", "", "write the diff to this file")
	seriesFile := fs.String("series", "", `write the run's commits as a patch series (git format-patch mails, for git am) to this file; "-" for stdout, instead of the diff`)
	asJSON := fs.Bool("json", false, "print the patch record as JSON on stdout instead of the diff")
	pos, err := parse(fs, args)
	if err != nil {
		return exitForParse(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	c, closeFn, err := client(ctx, env, *natsURL, dataDir(env, *data))
	if err != nil {
		failErr(env.stderr, err)
		return exitError
	}
	defer closeFn()
	p, diff, err := c.Run(pos[0]).Patch(ctx)
	if err != nil {
		failErr(env.stderr, err)
		return exitError
	}
	if p.Error != nil {
		fail(env.stderr, "warning: %s", p.Error.Error()) // the commit failed; the patch is whole
	}
	summarise(env.stderr, p)
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p)
	}
	if *patchFile != "" {
		if err := os.WriteFile(*patchFile, diff, 0o644); err != nil {
			fail(env.stderr, "write the patch: %v", err)
			return exitError
		}
		fmt.Fprintf(env.stderr, "patch written to %s\n", *patchFile)
	}
	if *seriesFile != "" {
		if err := writeSeries(ctx, env, c.Run(pos[0]), *seriesFile); err != nil {
			failErr(env.stderr, err)
			return exitError
		}
	}
	if *out != "" {
		changed, err := snapshot.Apply(diff, *out)
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) {
				fail(env.stderr, "the patch does not apply to %s, which is unchanged: %s", *out, pe.Error())
			} else {
				fail(env.stderr, "apply the patch to %s: %v", *out, err)
			}
			return exitError
		}
		fmt.Fprintf(env.stderr, "applied to %s: %d file(s) changed\n", *out, len(changed))
	}
	if *out == "" && *patchFile == "" && !*asJSON && *seriesFile != "-" {
		_, _ = env.stdout.Write(diff)
	}
	return exitOK
}

// writeSeries writes the run's commits as a patch series to file, or
// stdout for "-". A run that made no commit writes nothing, and says so.
func writeSeries(ctx context.Context, env *environ, run *harness.RunHandle, file string) error {
	commits, series, err := run.Series(ctx)
	if err != nil {
		return err
	}
	if len(commits) == 0 {
		fmt.Fprintln(env.stderr, "no commits: the run made none, so there is no series")
		return nil
	}
	if file == "-" {
		_, err := env.stdout.Write(series)
		return err
	}
	if err := os.WriteFile(file, series, 0o644); err != nil {
		return fmt.Errorf("write the patch series: %w", err)
	}
	fmt.Fprintf(env.stderr, "%d commit(s) written to %s as a patch series (apply with: git am %s)\n", len(commits), file, file)
	return nil
}

// summarise lists a patch's files for a person.
func summarise(w io.Writer, p *protocol.Patch) {
	if p == nil {
		return
	}
	if len(p.Files) == 0 {
		fmt.Fprintln(w, "no changes")
	}
	for _, f := range p.Files {
		note := ""
		if f.Kind != protocol.FileText {
			note = " (" + f.Kind + ", not in the patch)"
		}
		fmt.Fprintf(w, "  %-8s %s%s\n", f.Change, f.Path, note)
	}
	if p.FilesOmitted > 0 {
		fmt.Fprintf(w, "  … and %d more file(s), all in the patch\n", p.FilesOmitted)
	}
	if p.Commit != "" {
		fmt.Fprintf(w, "committed as %s in the workspace on sandboxer %s\n", p.Commit, p.Node)
	}
	if len(p.Commits) > 0 {
		fmt.Fprintf(w, "%d commit(s) made in the run, a patch series beside the diff (harness fetch --series FILE):\n", len(p.Commits))
		for _, c := range p.Commits {
			fmt.Fprintf(w, "  %s %s (%s)\n", c.ID[:min(12, len(c.ID))], c.Subject, c.Author)
		}
	}
}

// copyTree copies src to dst, which must not exist yet, for harness run
// --copy: its directories, regular files (with their permissions) and
// symbolic links, copied as links, so that the file tools judge a link in
// the copy by its target as they would in place. It leaves out, and says
// so on w, what the file tools refuse in place: a file with more than one
// hard link (another name of it may be a file outside the workspace or one
// the policy denies, and copied it would become a plain file, readable
// under the name that is allowed), a symbolic link whose target is
// absolute or leads out of src, and FIFOs, sockets and devices.
func copyTree(w io.Writer, src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists already; pick another --id", dst)
	}
	ws, err := tools.OpenWorkspace(src)
	if err != nil {
		return err
	}
	defer ws.Close()
	var left []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			if _, err := ws.ResolveLinks(filepath.ToSlash(rel)); errors.Is(err, protocol.ErrPathEscape) {
				left = append(left, fmt.Sprintf("%s: %s", rel, protocol.AsError(err).Message))
				return nil
			}
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		}
		// Read as read_file would: a file with several hard links, or one
		// that is not a regular file, is refused.
		data, err := ws.ReadFile(filepath.ToSlash(rel))
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) && (pe.Code == protocol.CodePathEscape || pe.Code == protocol.CodeBadArguments) {
				left = append(left, fmt.Sprintf("%s: %s", rel, pe.Message))
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, info.Mode().Perm())
	})
	for _, l := range left {
		fmt.Fprintf(w, "  --copy left out %s\n", l)
	}
	return err
}
