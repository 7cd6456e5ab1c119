package mcptools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioharness/harness/internal/mcptest"
	"github.com/ioharness/harness/pkg/mcptools"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
)

// TestMain lets the test binary be the MCP server the tests start.
func TestMain(m *testing.M) {
	mcptest.ServeIfRequested()
	os.Exit(m.Run())
}

// stdio starts the test server on the floor and connects to it.
func stdio(t *testing.T) (*mcptools.Session, string) {
	t.Helper()
	dir := t.TempDir()
	argv, env := mcptest.Install(t, dir)
	spec := sandbox.Spec{Argv: argv, Dir: dir, Env: append(sandbox.MinimalEnv(), mcptest.ServeEnv+"="+env[mcptest.ServeEnv], mcptest.GreetingEnv+"=hello")}
	p, err := floor.New().Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcptools.Stdio(t.Context(), "srv", p)
	if err != nil {
		t.Fatalf("Stdio: %v (stderr %s)", err, p.Stderr())
	}
	t.Cleanup(s.Close)
	return s, argv[1]
}

func names(specs []protocol.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func TestStdioSession(t *testing.T) {
	s, marker := stdio(t)
	want := []string{"mcp__srv__delete_thing", "mcp__srv__echo", "mcp__srv__fail", "mcp__srv__instance", "mcp__srv__sleep"}
	got := names(s.Tools())
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Tools() = %q, want %q", got, want)
	}
	for _, spec := range s.Tools() {
		if spec.Name != "mcp__srv__echo" {
			continue
		}
		var schema struct {
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema.Properties["text"] == nil {
			t.Errorf("echo's parameters = %s, want the server's schema with a text property", spec.Parameters)
		}
	}
	res, err := s.Call(t.Context(), "echo", json.RawMessage(`{"text":"hi"}`), 4096)
	if err != nil || res.IsError || res.Content != "echo: hi ("+mcptest.Seen("hello")+")" {
		t.Fatalf("Call(echo) = %+v, %v; want echo: hi (hello)", res, err)
	}
	res, err = s.Call(t.Context(), "fail", nil, 4096)
	if err != nil || !res.IsError || !strings.Contains(res.Content, "as asked") {
		t.Errorf("Call(fail) = %+v, %v; want an error result", res, err)
	}
	if _, err := s.Call(t.Context(), "no_such_tool", nil, 4096); err == nil || errors.Is(err, protocol.ErrMCP) {
		t.Errorf("Call(no_such_tool) error = %v, want the server's refusal, not a lost server", err)
	}
	if s.Lost() != nil {
		t.Fatalf("Lost() = %v after a refused call", s.Lost())
	}
	res, err = s.Call(t.Context(), "echo", json.RawMessage(`{"text":"`+strings.Repeat("x", 10000)+`"}`), 1000)
	if err != nil || len(res.Content) > 1000 || sandbox.ElidedBytes(res.Content) == 0 {
		t.Errorf("Call(echo 10000 bytes) with a 1000-byte limit = %d bytes, elided %d, %v", len(res.Content), sandbox.ElidedBytes(res.Content), err)
	}

	// Killed from outside: the next call and Lost say it died.
	pid := mcptest.Find(marker)
	if pid == 0 {
		t.Fatal("the server's process is not found")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, err = s.Call(t.Context(), "echo", json.RawMessage(`{"text":"hi"}`), 4096)
	if !errors.Is(err, protocol.ErrMCP) || !strings.Contains(err.Error(), "SIGKILL") {
		t.Errorf("Call after the server was killed error = %v, want mcp naming SIGKILL", err)
	}
	if l := s.Lost(); l == nil || !strings.Contains(l.Message, "SIGKILL") {
		t.Errorf("Lost() = %v, want it killed by SIGKILL", l)
	}
}

func TestStdioCloseLeavesNothing(t *testing.T) {
	s, marker := stdio(t)
	if mcptest.Find(marker) == 0 {
		t.Fatal("the server's process is not found")
	}
	s.Close()
	if pid := mcptest.Find(marker); pid != 0 {
		t.Errorf("process %d of the server is left after Close", pid)
	}
	if s.Lost() != nil {
		t.Errorf("Lost() = %v after Close, want nil: a closed session is not lost", s.Lost())
	}
}

func TestStdioCancelledCall(t *testing.T) {
	s, _ := stdio(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := s.Call(ctx, "sleep", json.RawMessage(`{"ms":30000}`), 4096)
	if err == nil || errors.Is(err, protocol.ErrMCP) || time.Since(began) > 10*time.Second {
		t.Fatalf("Call(sleep 30 s) cut off after 200 ms = %v after %v, want a cut-off call, not a lost server", err, time.Since(began))
	}
	if res, err := s.Call(t.Context(), "echo", json.RawMessage(`{"text":"after"}`), 4096); err != nil || !strings.HasPrefix(res.Content, "echo: after") {
		t.Errorf("Call(echo) after a cut-off call = %+v, %v", res, err)
	}
}

func TestStdioServerThatNeverAnswers(t *testing.T) {
	p, err := floor.New().Start(t.Context(), sandbox.Spec{Argv: []string{"sh", "-c", "echo going away >&2; exit 3"}, Dir: t.TempDir(), Env: sandbox.MinimalEnv()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcptools.Stdio(t.Context(), "srv", p)
	if !errors.Is(err, protocol.ErrMCP) {
		t.Fatalf("Stdio(a process that exits) error = %v, want mcp", err)
	}
	if !strings.Contains(err.Error(), "going away") {
		t.Errorf("Stdio error = %v, want the server's standard error in it", err)
	}
}

func TestHTTPSession(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.NewServer() }, nil))
	defer srv.Close()
	url := srv.URL
	var mu sync.Mutex
	var dialled []string
	client := mcptools.Client(func(host, port string) error {
		mu.Lock()
		defer mu.Unlock()
		dialled = append(dialled, host+":"+port)
		return nil
	})
	s, err := mcptools.HTTP(t.Context(), "web", url, client)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := len(s.Tools()); got != len(mcptest.Tools) {
		t.Errorf("Tools() = %d tools, want %d", got, len(mcptest.Tools))
	}
	res, err := s.Call(t.Context(), "echo", json.RawMessage(`{"text":"over http"}`), 4096)
	if err != nil || res.Content != "echo: over http" {
		t.Errorf("Call(echo) = %+v, %v", res, err)
	}
	mu.Lock()
	if len(dialled) == 0 {
		t.Error("the client dialled without asking its check")
	}
	mu.Unlock()

	// The server goes away: the next call says the server is gone.
	srv.Close()
	if _, err := s.Call(t.Context(), "echo", json.RawMessage(`{"text":"gone"}`), 4096); !errors.Is(err, protocol.ErrMCP) {
		t.Errorf("Call after the server closed error = %v, want mcp", err)
	}
	if s.Lost() == nil {
		t.Error("Lost() = nil after the server closed")
	}

	refused := mcptools.Client(func(host, port string) error { return fmt.Errorf("net %s:%s refused", host, port) })
	if _, err := mcptools.HTTP(t.Context(), "web", url, refused); !errors.Is(err, protocol.ErrMCP) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("HTTP with a check that refuses error = %v, want mcp naming the refusal", err)
	}
}
