package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestRunRefusesRootsItMayNotServe: harness run serves a workspace only
// beneath the contract's directory (or --root), never the file system's
// root, a system directory or the data directory, and says so before
// anything starts, with exit code 2.
func TestRunRefusesRootsItMayNotServe(t *testing.T) {
	data := t.TempDir()
	contractDir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(example, "contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(root string) string {
		p := filepath.Join(contractDir, "contract.json")
		b := bytes.Replace(raw, []byte(`"root": "workspace"`), []byte(`"root": "`+root+`"`), 1)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	elsewhere := filepath.Join(t.TempDir(), "app")
	if err := os.CopyFS(elsewhere, os.DirFS(filepath.Join(example, "workspace"))); err != nil {
		t.Fatal(err)
	}
	cassette, _ := filepath.Abs(filepath.Join(example, "cassette.json"))
	for _, tt := range []struct {
		name, root string
		extra      []string
		want       string
	}{
		{"the file system", "/", nil, "whole file system"},
		{"etc", "/etc", nil, "system directory"},
		{"proc", "/proc", nil, "system directory"},
		{"the data directory", data, []string{"--root", data}, "data directory"},
		{"outside the contract's directory", elsewhere, nil, "--root DIR"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--data", data, "--replay", cassette}, tt.extra...)
			code, out, errOut := cli(t, t.Context(), nil, append(args, write(tt.root))...)
			if code != exitUsage {
				t.Fatalf("run with root %s = %d, want %d\nstdout: %s\nstderr: %s", tt.root, code, exitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr does not say %q:\n%s", tt.want, errOut)
			}
		})
	}
	t.Run("named with --root", func(t *testing.T) {
		code, out, errOut := cli(t, t.Context(), nil, "run", "--data", data, "--replay", cassette, "--root", filepath.Dir(elsewhere), write(elsewhere))
		if code != exitOK || !strings.Contains(out+errOut, "success") {
			t.Fatalf("run under --root = %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
	})
	// No credentials are left behind once the run's process is done.
	for _, f := range []string{"server.json", "nats.env", "nats.sock"} {
		if _, err := os.Stat(filepath.Join(data, f)); err == nil {
			t.Errorf("%s is still in the data directory after the run", f)
		}
	}
}

// TestUpCredentials: harness up takes only authenticated connections; the
// harness CLI finds its credentials through the data directory alone (the
// README's `harness submit CONTRACT --wait`), and nats.env holds the three
// variables the nats CLI reads. When up stops, both files are gone.
func TestUpCredentials(t *testing.T) {
	data := t.TempDir()
	cassette, _ := filepath.Abs(filepath.Join(example, "cassette.json"))
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(example, "workspace"))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		env := &environ{stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" }}
		done <- dispatch(ctx, env, []string{"up", "--listen", "127.0.0.1:0", "--data", data, "--replay", cassette, "--root", ws})
		pw.Close()
	}()
	url := ""
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "NATS URL: "); ok {
			url = u
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" {
		t.Fatal("harness up printed no NATS URL")
	}
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to harness up")
	}
	vars := map[string]string{}
	b, err := os.ReadFile(filepath.Join(data, "nats.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	if vars["NATS_URL"] != url || vars["NATS_USER"] == "" || vars["NATS_PASSWORD"] == "" {
		t.Fatalf("nats.env = %q, want NATS_URL, NATS_USER and NATS_PASSWORD", b)
	}
	for _, f := range []string{"nats.env", "server.json"} {
		if fi, err := os.Stat(filepath.Join(data, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	nc, err := nats.Connect(vars["NATS_URL"], nats.UserInfo(vars["NATS_USER"], vars["NATS_PASSWORD"]))
	if err != nil {
		t.Fatalf("the nats.env credentials: %v", err)
	}
	nc.Close()
	raw, err := os.ReadFile(filepath.Join(example, "contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, bytes.Replace(raw, []byte(`"root": "workspace"`), []byte(`"root": "`+ws+`"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, t.Context(), map[string]string{"HARNESS_DATA": data}, "submit", contract, "--wait")
	if code != exitOK || !strings.Contains(out, "outcome success") {
		t.Fatalf("submit --wait through the data directory = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("up exited %d", code)
	}
	for _, f := range []string{"nats.env", "server.json"} {
		if _, err := os.Stat(filepath.Join(data, f)); err == nil {
			t.Errorf("%s is left behind after up stopped", f)
		}
	}
}

// TestRunRefusesDuplicateKeys: a contract naming a field twice (the later
// would silently win) is refused with exit code 2, naming the field.
func TestRunRefusesDuplicateKeys(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(example, "contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	dup := bytes.Replace(raw, []byte(`"net": "deny"}`), []byte(`"net": "deny", "exec": "allow"}`), 1)
	if bytes.Equal(dup, raw) {
		t.Fatal("the example's defaults changed; update this test")
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "workspace"), os.DirFS(filepath.Join(example, "workspace"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "contract.json")
	if err := os.WriteFile(path, dup, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, t.Context(), nil, "run", "--data", t.TempDir(), path)
	if code != exitUsage || !strings.Contains(errOut, "exec") || !strings.Contains(errOut, "twice") {
		t.Errorf("run with a duplicated key = %d\nstdout: %s\nstderr: %s; want exit 2 naming policy.defaults.exec", code, out, errOut)
	}
}
