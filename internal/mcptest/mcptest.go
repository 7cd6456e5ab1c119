// Package mcptest is a real MCP server for the tests, built from the same
// SDK the sandboxer speaks with (github.com/modelcontextprotocol/go-sdk):
// over stdio, as the test binary run again (ServeIfRequested in TestMain,
// Install to put the binary where a sandbox sees it), and over streamable
// HTTP (HTTP). Its tools:
//
//   - echo {text}: returns "echo: " and the text, and, when
//     MCPTEST_GREETING is set in its environment, Seen of its value
//     (which shows the value reached the server without showing it);
//   - delete_thing {name}: returns "deleted " and the name;
//   - fail {}: a result the server marks as an error;
//   - sleep {ms}: returns after ms milliseconds, or when cancelled;
//   - instance {}: returns an id made when the server started, the same
//     for every call of one process and different for the next.
//
// Only tests import it.
package mcptest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeEnv is the variable that turns the test binary into the stdio
// server: ServeIfRequested serves when it is "stdio".
const ServeEnv = "HARNESS_MCPTEST_SERVE"

// GreetingEnv is the variable echo adds to its answer, to show what a
// contract's env gives a server.
const GreetingEnv = "MCPTEST_GREETING"

// TokenFlag marks a server's command line, for finding its process
// (Find): Install's argv carries TokenFlag=<random>.
const TokenFlag = "-mcptest.token"

// Tools are the names of the server's tools.
var Tools = []string{"echo", "delete_thing", "fail", "sleep", "instance"}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

type deleteIn struct {
	Name string `json:"name" jsonschema:"the thing to delete"`
}

type sleepIn struct {
	MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}

type none struct{}

// NewServer returns the server with its tools.
func NewServer() *mcp.Server {
	instance := "instance " + Token()
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "instance", Description: "Say which server process answers."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: instance}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			out := "echo: " + in.Text
			if g := os.Getenv(GreetingEnv); g != "" {
				out += " (" + Seen(g) + ")"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_thing", Description: "Delete the named thing."},
		func(_ context.Context, _ *mcp.CallToolRequest, in deleteIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + in.Name}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail."},
		func(context.Context, *mcp.CallToolRequest, none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed, as asked"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep for ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept " + strconv.Itoa(in.MS) + " ms"}}}, nil, nil
		})
	return s
}

// Seen is what echo says of a greeting it was given: a digest of it.
func Seen(greeting string) string {
	sum := sha256.Sum256([]byte(greeting))
	return "greeting " + hex.EncodeToString(sum[:4])
}

// ServeIfRequested serves the server over stdio and exits when ServeEnv
// says so; otherwise it returns at once. Call it first thing in TestMain
// (after native.RunShimIfRequested).
func ServeIfRequested() {
	if os.Getenv(ServeEnv) != "stdio" {
		return
	}
	err := NewServer().Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && err != io.EOF && !strings.Contains(err.Error(), "EOF") {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Install links (or copies) the running test binary into dir (a workspace, which
// every sandbox shows), as .mcp/server, and returns the command that
// starts it as the stdio server, relative to dir, marked with a token of
// its own for Find, and the environment it needs (ServeEnv). The test
// binary must call ServeIfRequested in its TestMain.
func Install(t testing.TB, dir string) (argv []string, env map[string]string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, ".mcp", "server")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dst); err != nil && os.Link(self, dst) != nil {
		src, err := os.Open(self)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, src); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"./.mcp/server", TokenFlag + "=" + Token()}, map[string]string{ServeEnv: "stdio"}
}

// Token returns a fresh random token for a server's command line.
func Token() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Find returns the host pid of a live process whose command line holds
// marker (a server's TokenFlag=<token>), or 0. Zombies count as gone.
func Find(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), marker) {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(st)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && strings.ContainsRune("ZX", rune(s[i+2])) {
			continue
		}
		return pid
	}
	return 0
}

// HTTP serves the server over streamable HTTP on a loopback port for the
// test, and returns its URL.
func HTTP(t testing.TB) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return NewServer() }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}
