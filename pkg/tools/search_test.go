//go:build unix

package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ioharness/harness/pkg/protocol"
)

// searchTree is a workspace layout for the grep and find tests.
var searchTree = map[string]string{
	"main.go":                 "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
	"util/strings.go":         "package util\n\n// Hello says hello.\nfunc Hello() string { return \"hello\" }\n",
	"util/strings_test.go":    "package util\n\nfunc TestHello(t *testing.T) {}\n",
	"README.md":               "# hello project\r\nSay Hello.\r\n",
	"secrets/prod.env":        "API_KEY=hello-secret\n",
	".git/config":             "[core] hello\n",
	"node_modules/x/index.js": "hello from node_modules\n",
	"target/debug/out":        "hello from target\n",
	"bin/blob":                "hello\x00\xff binary",
	"latin1.txt":              "hello caf\xe9\n",
}

func TestGrep(t *testing.T) {
	env := newEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, searchTree)
	big := strings.Repeat("hello filler line\n", grepMaxFileSize/18+1)
	writeFiles(t, dir, map[string]string{"big.txt": big})
	if err := os.Symlink("util", filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("main.go", filepath.Join(dir, "link.go")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     string
		allow    func(act, path string) bool
		want     string
		wantCode protocol.Code
	}{
		{"substring", `{"pattern":"hello"}`, nil,
			"README.md:1: # hello project\nmain.go:4: \tprintln(\"hello\")\nsecrets/prod.env:1: API_KEY=hello-secret\nutil/strings.go:3: // Hello says hello.\nutil/strings.go:4: func Hello() string { return \"hello\" }\n" +
				"(3 files not searched: binary, not UTF-8, over 1 MiB, or not readable by the file tools)", 0},
		{"regexp", `{"pattern":"^func [A-Z]\\w*\\("}`, nil,
			"util/strings.go:4: func Hello() string { return \"hello\" }\nutil/strings_test.go:3: func TestHello(t *testing.T) {}\n" +
				"(3 files not searched: binary, not UTF-8, over 1 MiB, or not readable by the file tools)", 0},
		{"path_glob on base name", `{"pattern":"Hello","path_glob":"*_test.go"}`, nil,
			"util/strings_test.go:3: func TestHello(t *testing.T) {}", 0},
		{"path_glob on path", `{"pattern":"hello","path_glob":"util/*"}`, nil,
			"util/strings.go:3: // Hello says hello.\nutil/strings.go:4: func Hello() string { return \"hello\" }", 0},
		{"path_glob into a skipped dir", `{"pattern":"hello","path_glob":"node_modules/*"}`, nil,
			"node_modules/x/index.js:1: hello from node_modules", 0},
		{"policy hides files", `{"pattern":"hello","path_glob":"*"}`, func(act, p string) bool { return act == "read" && !strings.HasPrefix(p, "secrets/") && p != "big.txt" },
			"README.md:1: # hello project\nmain.go:4: \tprintln(\"hello\")\nutil/strings.go:3: // Hello says hello.\nutil/strings.go:4: func Hello() string { return \"hello\" }\n" +
				"(2 files not searched: binary, not UTF-8, over 1 MiB, or not readable by the file tools)", 0},
		{"no match", `{"pattern":"zebra","path_glob":"*.go"}`, nil, `no lines match "zebra" in 3 searched files`, 0},
		{"bad regexp", `{"pattern":"func ("}`, nil, "", protocol.CodeBadArguments},
		{"empty pattern", `{"pattern":""}`, nil, "", protocol.CodeBadArguments},
		{"unknown argument", `{"pattern":"a","path":"x"}`, nil, "", protocol.CodeBadArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.Judge = judgeBy(tt.allow)
			out, err := invoke(t, env, "grep", tt.args)
			if codeOf(err) != tt.wantCode {
				t.Fatalf("grep(%s) = %v, %v; want code %v", tt.args, out, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, out.Content); diff != "" {
				t.Errorf("grep(%s) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestGrepManyHits(t *testing.T) {
	env := newEnv(t)
	env.EntryCap = 2000
	var b strings.Builder
	for i := range 120 {
		fmt.Fprintf(&b, "match %d %s\n", i, strings.Repeat("x", 400))
	}
	writeFiles(t, env.Workspace.Dir(), map[string]string{"many.txt": b.String()})
	out, err := invoke(t, env, "grep", `{"pattern":"match"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Content, "many.txt:1: match 0 xxx") || !strings.Contains(out.Content, "…[truncated: elided ") {
		t.Errorf("grep = %q, want the first hits, each line cut, then a truncation note", out.Content)
	}
	if n := len([]rune(out.Content)); n > env.EntryCap {
		t.Errorf("grep returned %d chars, over the cap of %d", n, env.EntryCap)
	}
	env.EntryCap = 100000
	out, err = invoke(t, env, "grep", `{"pattern":"match"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.Content, "\nmany.txt:") + 1; got != grepMaxHits || !strings.HasSuffix(out.Content, "…and 70 more matching lines omitted; narrow the pattern or path_glob to see them") {
		t.Errorf("grep shows %d hits and ends %q, want %d and a count of the 70 omitted", got, out.Content[len(out.Content)-90:], grepMaxHits)
	}
}

func TestFind(t *testing.T) {
	env := newEnv(t)
	dir := env.Workspace.Dir()
	writeFiles(t, dir, searchTree)
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "outside")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     string
		allow    func(act, path string) bool
		want     string
		wantCode protocol.Code
	}{
		{"base name", `{"name_glob":"*.go"}`, nil, "main.go\nutil/strings.go\nutil/strings_test.go", 0},
		{"glob alias", `{"glob":"*_test.go"}`, nil, "util/strings_test.go", 0},
		{"relative path", `{"name_glob":"util/*"}`, nil, "util/strings.go\nutil/strings_test.go", 0},
		{"directories end in a slash", `{"name_glob":"util"}`, nil, "util/", 0},
		{"skipped dirs are listed, not entered", `{"name_glob":"*"}`, func(_, p string) bool { return !strings.Contains(p, "/") },
			".git/\nREADME.md\nbin/\nlatin1.txt\nmain.go\nnode_modules/\noutside\nsecrets/\ntarget/\nutil/", 0},
		{"glob naming a skipped dir enters it", `{"name_glob":".git/*"}`, nil, ".git/config", 0},
		{"symlinked dir not followed", `{"name_glob":"outside/*"}`, nil, `no paths match "outside/*"`, 0},
		{"policy hides paths", `{"name_glob":"*.env"}`, func(_, p string) bool { return !strings.HasPrefix(p, "secrets/") }, `no paths match "*.env"`, 0},
		{"question mark", `{"name_glob":"main.g?"}`, nil, "main.go", 0},
		{"both names", `{"name_glob":"*.go","glob":"*.md"}`, nil, "", protocol.CodeBadArguments},
		{"empty", `{"name_glob":""}`, nil, "", protocol.CodeBadArguments},
		{"missing", `{}`, nil, "", protocol.CodeBadArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env.Judge = judgeBy(tt.allow)
			out, err := invoke(t, env, "find", tt.args)
			if codeOf(err) != tt.wantCode {
				t.Fatalf("find(%s) = %v, %v; want code %v", tt.args, out, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, out.Content); diff != "" {
				t.Errorf("find(%s) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestFindCap(t *testing.T) {
	env := newEnv(t)
	files := map[string]string{}
	for i := range findMaxEntries + 25 {
		files[fmt.Sprintf("f%03d.txt", i)] = ""
	}
	writeFiles(t, env.Workspace.Dir(), files)
	out, err := invoke(t, env, "find", `{"name_glob":"*.txt"}`)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.Content, "\n")
	if len(lines) != findMaxEntries+1 || lines[0] != "f000.txt" || lines[findMaxEntries-1] != "f199.txt" ||
		lines[findMaxEntries] != "…and 25 more paths omitted; narrow the glob to see them" {
		t.Errorf("find listed %d lines, first %q, last %q; want %d sorted paths and a count of 25 omitted", len(lines), lines[0], lines[len(lines)-1], findMaxEntries)
	}
}

func TestSearchCancelled(t *testing.T) {
	env := newEnv(t)
	writeFiles(t, env.Workspace.Dir(), searchTree)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		tool Tool
		args string
	}{
		{"grep", Grep{}, `{"pattern":"x"}`},
		{"find", Find{}, `{"name_glob":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.tool.Invoke(ctx, env, []byte(tt.args)); !errors.Is(err, context.Canceled) {
				t.Errorf("%s(%s) with a cancelled context = %v, want context.Canceled", tt.name, tt.args, err)
			}
		})
	}
}
