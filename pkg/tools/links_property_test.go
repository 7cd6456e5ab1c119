//go:build unix

package tools

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestNoToolReachesADeniedFile is the property the link judging exists
// for: for random trees of files, directories, symbolic links (to files,
// to directories, chained, dangling, looping, leading out) and hard links,
// under random policies, no tool call ever returns a byte of a file one of
// whose real names the policy does not let be read, nor changes a file one
// of whose real names it does not let be written, nor creates a file where
// it does not let one be written. Every file holds a sentinel naming it;
// every output and every error is scanned for the sentinels of the files
// it must not show, and every file is compared before and after each call.
//
// The seed is logged; HARNESS_LINKS_SEED=N replays one.
func TestNoToolReachesADeniedFile(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("HARNESS_LINKS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("HARNESS_LINKS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (HARNESS_LINKS_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	trees, calls := 100, 40
	if testing.Short() {
		trees = 15
	}
	for i := range trees {
		propertyTree(t, rng, i, calls)
		if t.Failed() {
			return
		}
	}
}

// propNames are the names random trees are made of: some the builtin
// secrets deny, some a random rule may.
var propNames = []string{".env", "id_rsa", "k.key", "secret.txt", "pub.txt", "notes.md", "a", "b", "src", "private", "shot.png"}

// propPatterns are what random rules speak of.
var propPatterns = []string{"*", "*.txt", "*.md", "a/*", "b/*", "private/*", "src/*", "secret*", "pub.txt", "notes.md", "a", "shot.png", "*.png"}

func propertyTree(t *testing.T, rng *rand.Rand, n, calls int) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	out := filepath.Join(base, "outside")
	writeFiles(t, base, map[string]string{"outside/x": "SENTINEL-OUTSIDE-x;\n", "outside/.env": "SENTINEL-OUTSIDE-env;\n"})
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string // every name made, files, directories and links
	pick := func() string {
		if len(names) == 0 || rng.IntN(4) == 0 {
			// A fresh path, one or two deep.
			p := propNames[rng.IntN(len(propNames))]
			if rng.IntN(2) == 0 {
				p = propNames[rng.IntN(len(propNames))] + "/" + p
			}
			return p
		}
		return names[rng.IntN(len(names))]
	}
	seq := 0
	for range 8 + rng.IntN(12) {
		p := pick()
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			continue // a parent is a file or a link: skip this one
		}
		if _, err := os.Lstat(full); err == nil {
			continue
		}
		seq++
		switch k := rng.IntN(10); {
		case k < 4: // a file, its sentinel naming it
			content := fmt.Sprintf("SENTINEL-%d-%d;\n", n, seq)
			if strings.HasSuffix(p, ".png") {
				content = string(pngHeader) + content
			}
			if os.WriteFile(full, []byte(content), 0o644) != nil {
				continue
			}
		case k < 5:
			if os.Mkdir(full, 0o755) != nil {
				continue
			}
		case k < 9: // a relative link to another name, or to outside
			target := pick()
			rel, err := filepath.Rel(filepath.Dir(full), filepath.Join(ws, target))
			if err != nil {
				continue
			}
			switch rng.IntN(12) {
			case 0:
				rel = filepath.Join(out, "x") // absolute, outside
			case 1:
				rel = "../" + strings.Repeat("../", strings.Count(p, "/")) + "outside/.env"
			case 2:
				rel = "."
			}
			if os.Symlink(rel, full) != nil {
				continue
			}
		case k < 10 && rng.IntN(4) == 0: // a hard link to a file outside
			if os.Link(filepath.Join(out, "x"), full) != nil {
				continue
			}
		default: // a hard link to a file made before
			var files []string
			for _, o := range names {
				if fi, err := os.Lstat(filepath.Join(ws, o)); err == nil && fi.Mode().IsRegular() {
					files = append(files, o)
				}
			}
			if len(files) == 0 || os.Link(filepath.Join(ws, files[rng.IntN(len(files))]), full) != nil {
				continue
			}
		}
		names = append(names, p)
	}
	pol := randomPolicy(t, rng)
	w, err := OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	env := &Env{Workspace: w, Judge: policyJudge(pol)}
	set := BuiltinsWithImages()
	for c := range calls {
		tool, args := randomCall(rng, pick, c)
		before := realFiles(t, ws)
		beforeOut := realFiles(t, out)
		tl, _ := set.Get(tool)
		o, err := tl.Invoke(t.Context(), env, json.RawMessage(args))
		text := ""
		if err != nil {
			text = err.Error()
		} else {
			text = o.Content
			if o.Image != nil {
				text += string(o.Image.Data)
			}
		}
		after := realFiles(t, ws)
		what := fmt.Sprintf("tree %d, call %d: %s(%s)", n, c, tool, args)
		checkCall(t, pol, what, text, before, after)
		if diff := mapDiff(beforeOut, realFiles(t, out)); diff != "" {
			t.Errorf("%s changed outside the workspace: %s", what, diff)
		}
		for _, s := range []string{"SENTINEL-OUTSIDE-x", "SENTINEL-OUTSIDE-env"} {
			if strings.Contains(text, s) {
				t.Errorf("%s showed a file outside the workspace: %q", what, text)
			}
		}
		if t.Failed() {
			t.Logf("tree %d:\n%s\npolicy: %+v", n, describeTree(t, ws), pol.Protocol())
			return
		}
	}
}

// randomPolicy makes a policy of random read and write rules and defaults;
// FromProtocol adds the builtin layers.
func randomPolicy(t *testing.T, rng *rand.Rand) *policy.Policy {
	effects := []string{"allow", "ask", "deny"}
	var rules []protocol.Rule
	for range rng.IntN(6) {
		rules = append(rules, protocol.Rule{
			Act:     []string{"read", "write"}[rng.IntN(2)],
			Effect:  effects[rng.IntN(3)],
			Pattern: propPatterns[rng.IntN(len(propPatterns))],
		})
	}
	p := &protocol.Policy{Defaults: &protocol.Defaults{Read: effects[rng.IntN(3)], Write: effects[rng.IntN(3)]}}
	if len(rules) > 0 {
		p.Layers = []protocol.Layer{{Name: "random", Rules: rules}}
	}
	pol, err := policy.FromProtocol(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// randomCall picks a tool call on random names, some through links.
func randomCall(rng *rand.Rand, pick func() string, c int) (string, string) {
	p := pick()
	if rng.IntN(3) == 0 {
		p = pick() + "/" + propNames[rng.IntN(len(propNames))] // through a directory, or a link to one
	}
	var m map[string]string
	tool := []string{"read_file", "read_file", "write_file", "write_file", "edit_file", "grep", "find", "view_image"}[rng.IntN(8)]
	switch tool {
	case "read_file", "view_image":
		m = map[string]string{"path": p}
	case "write_file":
		m = map[string]string{"path": p, "content": fmt.Sprintf("written by call %d\n", c)}
	case "edit_file":
		m = map[string]string{"path": p, "search": "SENTINEL", "replace": "edited"}
	case "grep":
		m = map[string]string{"pattern": "SENTINEL"}
		if rng.IntN(2) == 0 {
			m["path_glob"] = propPatterns[rng.IntN(len(propPatterns))]
		}
	case "find":
		m = map[string]string{"name_glob": propPatterns[rng.IntN(len(propPatterns))]}
	}
	b, _ := json.Marshal(m)
	return tool, string(b)
}

// realFile is one regular file as the property test sees it: its inode
// and its bytes.
type realFile struct {
	ino     uint64
	content string
}

// realFiles maps every regular file's real path under dir (found without
// following links) to its inode and bytes.
func realFiles(t *testing.T, dir string) map[string]realFile {
	t.Helper()
	m := map[string]realFile{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = realFile{ino: fi.Sys().(*syscall.Stat_t).Ino, content: string(b)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkCall checks one call's output and effects against the policy: a
// file may show only if every real name of it may be read outright, and
// change only if every real name of it may be written outright.
func checkCall(t *testing.T, pol *policy.Policy, what, text string, before, after map[string]realFile) {
	t.Helper()
	names := map[uint64][]string{}
	for p, f := range before {
		names[f.ino] = append(names[f.ino], p)
	}
	allowed := func(act policy.Act, ps []string) bool {
		return !slices.ContainsFunc(ps, func(p string) bool { return pol.CheckPath(act, p).Effect != policy.Allow })
	}
	for p, f := range before {
		ps := names[f.ino]
		if !allowed(policy.Read, ps) {
			for _, line := range strings.Split(f.content, "\n") {
				if strings.HasPrefix(line, "SENTINEL-") && strings.Contains(text, line) {
					t.Errorf("%s showed %s (%q), whose names %v the policy does not let be read: %q", what, p, line, ps, text)
				}
			}
		}
		if !allowed(policy.Write, ps) {
			if g, ok := after[p]; !ok || g.content != f.content {
				t.Errorf("%s changed %s (names %v), which the policy does not let be written: %q -> %q", what, p, ps, f.content, g.content)
			}
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && pol.CheckPath(policy.Write, p).Effect != policy.Allow {
			t.Errorf("%s created %s, which the policy does not let be written", what, p)
		}
	}
}

func mapDiff(a, b map[string]realFile) string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			d = append(d, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k)
		}
	}
	return strings.Join(d, ", ")
}

// describeTree lists the tree for a failure: each entry, and each link's
// target.
func describeTree(t *testing.T, dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, "  %s -> %s\n", rel, target)
		case d.IsDir():
			fmt.Fprintf(&b, "  %s/\n", rel)
		default:
			c, _ := os.ReadFile(p)
			fi, _ := d.Info()
			fmt.Fprintf(&b, "  %s (%d links) %q\n", rel, fi.Sys().(*syscall.Stat_t).Nlink, path.Base(string(c)))
		}
		return nil
	})
	return b.String()
}
