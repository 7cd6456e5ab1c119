package process

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/mcptest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// TestMain lets this test binary be the MCP server a sandboxer process
// starts (internal/mcptest).
func TestMain(m *testing.M) {
	mcptest.ServeIfRequested()
	os.Exit(m.Run())
}

// mcpModel is an OpenAI-compatible model whose n-th turn of a run (n from
// 0, counted by the assistant messages it was sent) is turn(n); it keeps
// the tool names of every request.
type mcpModel struct {
	srv  *httptest.Server
	turn func(n int) (text string, calls [][2]string)

	mu    sync.Mutex
	tools [][]string
}

func newMCPModel(t *testing.T, turn func(n int) (string, [][2]string)) *mcpModel {
	t.Helper()
	m := &mcpModel{turn: turn}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *mcpModel) env() []string {
	return []string{"HARNESS_PROVIDERS=openai", "OPENAI_API_KEY=sk-mcp-test", "OPENAI_BASE_URL=" + m.srv.URL + "/v1", "OPENAI_MODEL=mcp-model"}
}

func (m *mcpModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	n := 0
	for _, msg := range req.Messages {
		if msg.Role == "assistant" {
			n++
		}
	}
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Function.Name)
	}
	m.mu.Lock()
	m.tools = append(m.tools, names)
	m.mu.Unlock()
	text, calls := m.turn(n)
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	_ = writeTurn(w, chatRequest{Model: req.Model, Stream: req.Stream}, fanCall{agent: "mcp", turn: n}, text, calls, finish, 100, 10)
}

// seen returns the tool names of the first request.
func (m *mcpModel) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.tools) == 0 {
		return nil
	}
	return m.tools[0]
}

// mcpProcessContract is the contract of the stdio server installed in ws,
// run on backend.
func mcpProcessContract(ws, backend string, argv []string, env map[string]string) *protocol.Contract {
	return &protocol.Contract{Schema: protocol.ContractSchema, Task: "Use the server's tools.",
		Workspace:    protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}},
		Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "mcp", Rules: []protocol.Rule{
			{Act: "exec", Effect: "allow", Pattern: "mcp__srv__*"},
			{Act: "exec", Effect: "deny", Pattern: "mcp__srv__delete_*"},
			{Act: "exec", Effect: "allow", Pattern: "./.mcp/server*"},
			{Act: "exec", Effect: "allow", Pattern: "server*"},
		}}}, Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}},
		Budget:  protocol.Budget{MaxSteps: 6},
		Sandbox: protocol.SandboxSpec{Backend: backend, Limits: protocol.Limits{WallSecs: 900}},
		MCP:     &protocol.MCPSpec{Servers: []protocol.MCPServer{{Name: "srv", Command: argv, Env: env}}},
	}
}

// skipWithoutNative skips t when a run on the native backend failed for
// want of one on this machine (fails it instead under
// HARNESS_REQUIRE_NATIVE=1).
func skipWithoutNative(t *testing.T, backend string, o protocol.Outcome, reason string) {
	t.Helper()
	if backend != "native" || o != protocol.OutcomeFailed && o != protocol.OutcomeRefused || !strings.Contains(reason, "native") {
		return
	}
	if os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" {
		t.Fatalf("%s (HARNESS_REQUIRE_NATIVE=1)", reason)
	}
	t.Skipf("no native sandbox here: %s", reason)
}

// rolesUp waits until the three roles answer on the bus, so that a
// submission is answered at once.
func rolesUp(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	want := []string{"harness-coordinator", "harness-sandboxer", "harness-worker"}
	testkit.CheckFor(t, time.Minute, 50*time.Millisecond, func() error {
		if got := services(t, nc); !slices.Equal(got, want) {
			return fmt.Errorf("roles answering: %q", got)
		}
		return nil
	})
}

// gone waits until no process of the server marked so is left.
func gone(t *testing.T, marker, when string) {
	t.Helper()
	testkit.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if pid := mcptest.Find(marker); pid != 0 {
			return fmt.Errorf("%s, the server's process %d is still running", when, pid)
		}
		return nil
	})
}

// TestMCPAcrossProcesses runs a stdio MCP server under a sandboxer
// process, on the floor and on the native backend, with the coordinator
// and the worker in processes of their own: the model sees the server's
// tools, echo is called, delete_thing is refused by the exec rule, and no
// process of the server is left once the run has ended.
func TestMCPAcrossProcesses(t *testing.T) {
	bin := roleBinaries(t)
	for _, backend := range []string{"floor", "native"} {
		t.Run(backend, func(t *testing.T) {
			model := newMCPModel(t, func(n int) (string, [][2]string) {
				if n == 0 {
					return "", [][2]string{{"mcp__srv__echo", `{"text":"across"}`}, {"mcp__srv__delete_thing", `{"name":"all"}`}}
				}
				return "Done.", nil
			})
			ws := t.TempDir()
			argv, env := mcptest.Install(t, ws)
			url, c := serverAndClient(t)
			penv := append([]string{"NATS_URL=" + url, "HARNESS_ALLOW_FLOOR=1"}, model.env()...)
			startProcess(t, filepath.Join(bin, "sandboxer"), penv, "--root", ws, "--backends", backend)
			startProcess(t, filepath.Join(bin, "worker"), penv)
			startProcess(t, filepath.Join(bin, "coordinator"), penv)
			rolesUp(t, url)
			h, err := c.Submit(t.Context(), mcpProcessContract(ws, backend, argv, env), harness.WithRunID("mcp-across-"+backend))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			skipWithoutNative(t, backend, res.Outcome, res.Reason)
			if res.Outcome != protocol.OutcomeFinished {
				t.Fatalf("outcome = %s (%s), want finished", res.Outcome, res.Reason)
			}
			if seen := model.seen(); !slices.Contains(seen, "mcp__srv__echo") || !slices.Contains(seen, "mcp__srv__delete_thing") {
				t.Errorf("the model was offered %q, want the server's tools among them", seen)
			}
			recs, err := h.Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			obs := recs[1].Observations
			if len(obs) != 2 || obs[0].Status != protocol.CallOK || obs[0].Content != "echo: across" {
				t.Fatalf("step 1's observations = %+v, want echo ok first", obs)
			}
			if obs[1].Status != protocol.CallRefused || obs[1].Refused == nil || obs[1].Refused.Rule != "mcp__srv__delete_*" {
				t.Errorf("delete_thing = %s %+v, want refused by mcp__srv__delete_*", obs[1].Status, obs[1].Refused)
			}
			gone(t, argv[1], "after the run")
		})
	}
}

// TestMCPSandboxerCrash kills the sandboxer process with SIGKILL while a
// call of its server runs, on the floor and on the native backend: the
// server dies with it, the call cut off is
// indeterminate and never made again, and the sandboxer started again
// opens the server anew for the next call; nothing of either server is
// left once the run has ended.
func TestMCPSandboxerCrash(t *testing.T) {
	bin := roleBinaries(t)
	for _, backend := range []string{"floor", "native"} {
		t.Run(backend, func(t *testing.T) { sandboxerCrash(t, bin, backend) })
	}
}

func sandboxerCrash(t *testing.T, bin, backend string) {
	model := newMCPModel(t, func(n int) (string, [][2]string) {
		switch n {
		case 0:
			return "", [][2]string{{"mcp__srv__sleep", `{"ms":600000}`}}
		case 1:
			return "", [][2]string{{"mcp__srv__echo", `{"text":"after the crash"}`}}
		}
		return "Done.", nil
	})
	ws := t.TempDir()
	argv, env := mcptest.Install(t, ws)
	url, c := serverAndClient(t)
	penv := append([]string{"NATS_URL=" + url, "HARNESS_ALLOW_FLOOR=1"}, model.env()...)
	first := startProcess(t, filepath.Join(bin, "sandboxer"), penv, "--id", "sb-mcp", "--root", ws, "--backends", backend)
	startProcess(t, filepath.Join(bin, "worker"), penv)
	startProcess(t, filepath.Join(bin, "coordinator"), penv)

	rolesUp(t, url)
	h := c.Run("mcp-crash")
	var mu sync.Mutex
	var calls []string
	stop, err := h.Watch(func(ev *protocol.Event) {
		if ev.Kind == protocol.EventToolCall {
			mu.Lock()
			calls = append(calls, ev.Tool)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := c.Submit(t.Context(), mcpProcessContract(ws, backend, argv, env), harness.WithRunID("mcp-crash")); err != nil {
		t.Fatal(err)
	}
	var ended *protocol.RunState
	testkit.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		if st, err := h.Status(t.Context()); err == nil && st.Status != protocol.StatusRunning {
			ended = st // it could not start its server
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(calls, "mcp__srv__sleep") || mcptest.Find(argv[1]) == 0 {
			return fmt.Errorf("the sleep call is not under way yet (calls %q)", calls)
		}
		return nil
	})
	if ended != nil {
		skipWithoutNative(t, backend, ended.Outcome, ended.Reason)
		t.Fatalf("the run ended before its call: %s (%s)", ended.Outcome, ended.Reason)
	}
	// The sandboxer has begun the call (its start is in the ops bucket):
	// the crash cuts it off, rather than coming before the sandboxer had
	// it, when the call would rightly be made on the next one.
	ops, err := c.JetStream().KeyValue(t.Context(), wire.BucketOps)
	if err != nil {
		t.Fatal(err)
	}
	testkit.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		e, err := ops.Get(t.Context(), wire.OpKey("mcp-crash.1.0.1"))
		if err != nil {
			return fmt.Errorf("the sleep call has not begun on the sandboxer: %w", err)
		}
		var rec wire.OpRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Done {
			return fmt.Errorf("the sleep call's record is %s, want begun and not done", e.Value())
		}
		return nil
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	gone(t, argv[1], "after the sandboxer was killed")

	startProcess(t, filepath.Join(bin, "sandboxer"), penv, "--id", "sb-mcp", "--root", ws, "--backends", backend)
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("outcome = %s (%s), want finished", res.Outcome, res.Reason)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 4 {
		t.Fatalf("trace of %d records, want two steps of calls", len(recs))
	}
	if o := recs[1].Observations[0]; o.Status != protocol.CallIndeterminate {
		t.Errorf("the call cut off by the crash = %s %q, want indeterminate", o.Status, o.Content)
	}
	if o := recs[2].Observations[0]; o.Status != protocol.CallOK || o.Content != "echo: after the crash" {
		t.Errorf("the call after the restart = %s %q, want ok from a server opened again", o.Status, o.Content)
	}
	gone(t, argv[1], "after the run")
}

// TestMCPHTTPAcrossProcesses has a sandboxer process dial a server over
// streamable HTTP under a net allow of its host, and refuse it under a
// deny, with the coordinator and the worker in processes of their own.
func TestMCPHTTPAcrossProcesses(t *testing.T) {
	bin := roleBinaries(t)
	model := newMCPModel(t, func(n int) (string, [][2]string) {
		if n == 0 {
			return "", [][2]string{{"mcp__srv__echo", `{"text":"over http"}`}}
		}
		return "Done.", nil
	})
	server := mcptest.HTTP(t)
	ws := t.TempDir()
	url, c := serverAndClient(t)
	penv := append([]string{"NATS_URL=" + url}, model.env()...)
	startProcess(t, filepath.Join(bin, "sandboxer"), penv, "--root", ws, "--backends", "native")
	startProcess(t, filepath.Join(bin, "worker"), penv)
	startProcess(t, filepath.Join(bin, "coordinator"), penv)
	rolesUp(t, url)
	contract := func(net string) *protocol.Contract {
		c := mcpProcessContract(ws, "auto", nil, nil)
		c.MCP.Servers[0] = protocol.MCPServer{Name: "srv", URL: server}
		c.Policy.Layers[0].Rules = append(c.Policy.Layers[0].Rules, protocol.Rule{Act: "net", Effect: net, Pattern: "127.0.0.1"})
		return c
	}
	h, err := c.Submit(t.Context(), contract("allow"), harness.WithRunID("mcp-http-across"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("outcome = %s (%s), want finished", res.Outcome, res.Reason)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if o := recs[1].Observations[0]; o.Status != protocol.CallOK || o.Content != "echo: over http" {
		t.Errorf("echo over http = %s %q", o.Status, o.Content)
	}
	h, err = c.Submit(t.Context(), contract("deny"), harness.WithRunID("mcp-http-across-denied"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err = h.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeRefused || !strings.Contains(res.Reason, "net") {
		t.Errorf("a server whose host is denied: %s (%s), want refused by the net rule", res.Outcome, res.Reason)
	}
}
