package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConsoleNeedsATokenFile checks no console starts without a token
// file, on harness console or harness up, nor on one others may read.
func TestConsoleNeedsATokenFile(t *testing.T) {
	if code, _, errOut := cli(t, t.Context(), nil, "console", "--listen", "127.0.0.1:0"); code != exitUsage || !strings.Contains(errOut, "--token-file") || !strings.Contains(errOut, "no default password") {
		t.Errorf("console without --token-file = %d %q, want a usage error naming --token-file", code, errOut)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "up", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--console", "127.0.0.1:0"); code != exitUsage || !strings.Contains(errOut, "--token-file") {
		t.Errorf("up --console without --token-file = %d %q, want a usage error naming --token-file", code, errOut)
	}
	open := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(open, []byte("alice:0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := cli(t, t.Context(), nil, "console", "--token-file", open); code != exitUsage || !strings.Contains(errOut, "chmod 600") {
		t.Errorf("console with a 0644 token file = %d %q, want a usage error saying chmod 600", code, errOut)
	}
}

// TestUpServesTheConsole runs harness up --console and harness console
// --data on the same data directory: each prints where it listens, and
// serves the runs to a bearer token of the file and to nobody else.
func TestUpServesTheConsole(t *testing.T) {
	data := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice:0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cassette, _ := filepath.Abs(filepath.Join(example, "cassette.json"))
	start := func(ctx context.Context, args ...string) (string, chan int) {
		t.Helper()
		pr, pw := io.Pipe()
		done := make(chan int, 1)
		go func() {
			env := &environ{stdout: pw, stderr: io.Discard, getenv: func(string) string { return "" }}
			done <- dispatch(ctx, env, args)
			pw.Close()
		}()
		sc := bufio.NewScanner(pr)
		addr := ""
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "console:  "); ok {
				addr, _, _ = strings.Cut(rest, " ")
				break
			}
		}
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		if addr == "" {
			t.Fatalf("harness %s printed no console address", args[0])
		}
		return addr, done
	}
	get := func(url, token string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	upCtx, stopUp := context.WithCancel(t.Context())
	upAt, upDone := start(upCtx, "up", "--listen", "127.0.0.1:0", "--data", data, "--replay", cassette, "--console", "127.0.0.1:0", "--token-file", tokens)
	if status := get(upAt+"/runs", "0123456789abcdef0123"); status != http.StatusOK {
		t.Errorf("up's console /runs with the token: status %d, want 200", status)
	}
	if status := get(upAt+"/runs", ""); status != http.StatusUnauthorized {
		t.Errorf("up's console /runs without a token: status %d, want 401", status)
	}

	conCtx, stopCon := context.WithCancel(t.Context())
	conAt, conDone := start(conCtx, "console", "--data", data, "--listen", "127.0.0.1:0", "--token-file", tokens)
	if !strings.HasPrefix(conAt, "http://127.0.0.1:") {
		t.Errorf("harness console listens at %s, want loopback", conAt)
	}
	for _, path := range []string{"/runs", "/fleet", "/approvals"} {
		if status := get(conAt+path, "0123456789abcdef0123"); status != http.StatusOK {
			t.Errorf("harness console --data %s: status %d, want 200", path, status)
		}
	}
	for name, stop := range map[string]struct {
		stop func()
		done chan int
	}{"console": {stopCon, conDone}, "up": {stopUp, upDone}} {
		stop.stop()
		select {
		case code := <-stop.done:
			if code != exitOK {
				t.Errorf("harness %s exited %d", name, code)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("harness %s did not stop", name)
		}
	}
}
