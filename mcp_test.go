package harness_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/mcptest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandbox/native"
)

// The MCP servers of issue 15, on the embedded default: a real server
// built from the SDK the sandboxer speaks with (the test binary itself,
// see internal/mcptest), started by the sandboxer inside the run's sandbox
// over stdio, and a server on httptest dialled over streamable HTTP.

// secretGreeting is an env value of the server: it reaches the server
// (echo shows a digest of it) and no trace, event or reply.
const secretGreeting = "s3cret-greeting-value"

// mcpBackend is a backend the stdio tests run on.
type mcpBackend struct {
	name  string
	start func(t *testing.T) []sandbox.Backend
}

var mcpBackends = []mcpBackend{
	{"floor", func(t *testing.T) []sandbox.Backend { return []sandbox.Backend{floor.New()} }},
	{"native", func(t *testing.T) []sandbox.Backend {
		b, err := native.New(native.Config{})
		if err != nil {
			if os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" {
				t.Fatalf("native.New: %v (HARNESS_REQUIRE_NATIVE=1)", err)
			}
			t.Skipf("no native sandbox here (HARNESS_REQUIRE_NATIVE=1 makes this a failure): %v", err)
		}
		return []sandbox.Backend{b}
	}},
}

// mcpRun is one run of the MCP tests: its cluster, its contract, and what
// it published.
type mcpRun struct {
	cl     *harness.Cluster
	ws     string
	marker string // the server's command line holds it
	c      *protocol.Contract
	mu     sync.Mutex
	events []*protocol.Event
}

// mcpContract is a contract whose server srv is the test's stdio server
// (or, with url, an HTTP server), under a policy that lets the server
// start and its tools be called, except delete_*.
func mcpContract(ws, backend string, argv []string, env map[string]string, url string) *protocol.Contract {
	rules := []protocol.Rule{
		{Act: "exec", Effect: "allow", Pattern: "mcp__srv__*"},
		{Act: "exec", Effect: "deny", Pattern: "mcp__srv__delete_*"},
	}
	srv := protocol.MCPServer{Name: "srv"}
	if url != "" {
		srv.URL = url
		rules = append(rules, protocol.Rule{Act: "net", Effect: "allow", Pattern: "127.0.0.1"})
	} else {
		srv.Command, srv.Env = argv, env
		// A program named by its path is judged by its path and by its
		// name, so an allow covers both.
		rules = append(rules, protocol.Rule{Act: "exec", Effect: "allow", Pattern: "./.mcp/server*"},
			protocol.Rule{Act: "exec", Effect: "allow", Pattern: "server*"})
	}
	return &protocol.Contract{Schema: protocol.ContractSchema, Task: "Use the server's tools.",
		Workspace:    protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}},
		Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "mcp", Rules: rules}},
			Defaults: &protocol.Defaults{Read: "allow", Write: "deny", Exec: "deny", Net: "deny"}},
		Budget:  protocol.Budget{MaxSteps: 6},
		Sandbox: protocol.SandboxSpec{Backend: backend},
		MCP:     &protocol.MCPSpec{Servers: []protocol.MCPServer{srv}},
	}
}

// startMCP starts a cluster on be with agent, and a contract whose server
// is the test binary installed in a fresh workspace.
func startMCP(t *testing.T, be mcpBackend, agent provider.Provider) *mcpRun {
	t.Helper()
	ws := t.TempDir()
	argv, env := mcptest.Install(t, ws)
	env[mcptest.GreetingEnv] = secretGreeting
	r := &mcpRun{ws: ws, marker: argv[1], c: mcpContract(ws, be.name, argv, env, "")}
	r.cl = clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent,
		Backends: be.start(t), AllowFloor: be.name == "floor"})
	return r
}

// submit submits the contract as run id, watching its events first.
func (r *mcpRun) submit(t *testing.T, id string) *harness.RunHandle {
	t.Helper()
	stop, err := r.cl.Run(id).Watch(func(ev *protocol.Event) {
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	h, err := r.cl.Submit(t.Context(), r.c, harness.WithRunID(id))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// eventsOf returns the events of kind published so far.
func (r *mcpRun) eventsOf(kind string) []*protocol.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*protocol.Event
	for _, ev := range r.events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvent waits for an event of kind that ok accepts.
func (r *mcpRun) waitEvent(t *testing.T, kind string, ok func(*protocol.Event) bool) *protocol.Event {
	t.Helper()
	var found *protocol.Event
	testkit.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		for _, ev := range r.eventsOf(kind) {
			if ok(ev) {
				found = ev
				return nil
			}
		}
		return fmt.Errorf("no %s event yet", kind)
	})
	return found
}

// noServerLeft waits until no process of the server is left on the
// machine.
func noServerLeft(t *testing.T, marker string) {
	t.Helper()
	testkit.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if pid := mcptest.Find(marker); pid != 0 {
			return fmt.Errorf("the server's process %d is still running", pid)
		}
		return nil
	})
}

func call(id, name, args string) protocol.ToolCall {
	return protocol.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// toolNamed returns the spec of the tool called name among tools.
func toolNamed(tools []protocol.ToolSpec, name string) *protocol.ToolSpec {
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i]
		}
	}
	return nil
}

// TestMCPStdioServer runs an agent that sees the server's tools in its
// request, calls echo (the observation carries the server's answer, which
// shows the contract's env reached it), and is refused delete_thing by the
// exec rule; the server's env values reach no trace or event, and no
// process of the server is left once the run has ended.
func TestMCPStdioServer(t *testing.T) {
	for _, be := range mcpBackends {
		t.Run(be.name, func(t *testing.T) {
			var seen []protocol.ToolSpec
			agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
				if n == 1 {
					seen = slices.Clone(req.Tools)
					return &protocol.Turn{ToolCalls: []protocol.ToolCall{
						call("e", "mcp__srv__echo", `{"text":"hi"}`),
						call("d", "mcp__srv__delete_thing", `{"name":"everything"}`),
					}}, nil
				}
				return &protocol.Turn{Text: "Done."}, nil
			})
			r := startMCP(t, be, agent)
			h := r.submit(t, "mcp-"+be.name)
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFinished {
				t.Fatalf("outcome = %s (%s), want finished", res.Outcome, res.Reason)
			}

			// The tools offered: the server's, under its name, with its schema,
			// beside the built-ins.
			echo := toolNamed(seen, "mcp__srv__echo")
			if echo == nil || toolNamed(seen, "mcp__srv__delete_thing") == nil || toolNamed(seen, "read_file") == nil {
				t.Fatalf("the request's tools are %v, want mcp__srv__echo, mcp__srv__delete_thing and the built-ins", names(seen))
			}
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(echo.Parameters, &schema); err != nil || schema.Properties["text"] == nil {
				t.Errorf("mcp__srv__echo's parameters = %s, want the server's schema with its text property", echo.Parameters)
			}

			recs, err := h.Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			obs := recs[1].Observations
			if len(obs) != 2 {
				t.Fatalf("step 1 has %d observations, want 2", len(obs))
			}
			if want := "echo: hi (" + mcptest.Seen(secretGreeting) + ")"; obs[0].Status != protocol.CallOK || obs[0].Content != want {
				t.Errorf("echo's observation = %s %q, want ok %q", obs[0].Status, obs[0].Content, want)
			}
			if obs[1].Status != protocol.CallRefused || obs[1].Refused == nil || obs[1].Refused.Rule != "mcp__srv__delete_*" || obs[1].Refused.Act != "exec" {
				t.Errorf("delete_thing's observation = %s %+v, want refused by exec rule mcp__srv__delete_*", obs[1].Status, obs[1].Refused)
			}

			// The env's values are kept out of the trace and the events.
			if env := recs[0].Contract.MCP.Servers[0].Env; env[mcptest.GreetingEnv] != protocol.RedactedValue {
				t.Errorf("the started record's env = %v, want %s's value redacted", env, mcptest.GreetingEnv)
			}
			raw, _ := json.Marshal(recs)
			r.mu.Lock()
			evs, _ := json.Marshal(r.events)
			r.mu.Unlock()
			if strings.Contains(string(raw), secretGreeting) || strings.Contains(string(evs), secretGreeting) {
				t.Errorf("the server's env value is in the trace or the events")
			}

			// What was published: the connect, each tool offered, the call with
			// its duration, and the disconnect when the run ended.
			conn := r.waitEvent(t, protocol.EventMCPConnect, func(ev *protocol.Event) bool { return ev.Target == "srv" })
			if !strings.Contains(conn.Text, be.name) {
				t.Errorf("mcp_connect text = %q, want the backend %s named", conn.Text, be.name)
			}
			var offered []string
			for _, ev := range r.eventsOf(protocol.EventMCPToolOffered) {
				offered = append(offered, ev.Tool)
			}
			slices.Sort(offered)
			if want := []string{"mcp__srv__delete_thing", "mcp__srv__echo", "mcp__srv__fail", "mcp__srv__instance", "mcp__srv__sleep"}; !slices.Equal(offered, want) {
				t.Errorf("mcp_tool_offered events = %q, want %q", offered, want)
			}
			calls := r.eventsOf(protocol.EventMCPCall)
			if len(calls) != 1 || calls[0].Tool != "mcp__srv__echo" || calls[0].Status != protocol.CallOK || calls[0].Target != "srv" {
				t.Errorf("mcp_call events = %+v, want one ok call of mcp__srv__echo (the refused call never reached the server)", calls)
			}
			r.waitEvent(t, protocol.EventMCPDisconnect, func(ev *protocol.Event) bool { return ev.Target == "srv" && !ev.IsError })
			noServerLeft(t, r.marker)
		})
	}
}

func names(specs []protocol.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// TestMCPServerDiesMidRun kills the server between two turns: the call
// after it is a failed observation in the trace, and the run fails with
// the typed mcp error naming the server and how it died.
func TestMCPServerDiesMidRun(t *testing.T) {
	for _, be := range mcpBackends {
		t.Run(be.name, func(t *testing.T) {
			var r *mcpRun
			agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
				switch n {
				case 1:
					return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("1", "mcp__srv__echo", `{"text":"first"}`)}}, nil
				case 2:
					pid := mcptest.Find(r.marker)
					if pid == 0 {
						return nil, errors.New("the server is not running at the second turn")
					}
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						return nil, err
					}
					return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("2", "mcp__srv__echo", `{"text":"second"}`)}}, nil
				}
				return &protocol.Turn{Text: "Done."}, nil
			})
			r = startMCP(t, be, agent)
			h := r.submit(t, "mcp-dies-"+be.name)
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFailed || !strings.HasPrefix(res.Reason, "mcp:") || !strings.Contains(res.Reason, `"srv"`) || !strings.Contains(res.Reason, "SIGKILL") {
				t.Fatalf("outcome = %s (%s), want failed with the mcp error naming srv killed by SIGKILL", res.Outcome, res.Reason)
			}
			recs, err := h.Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 4 {
				t.Fatalf("trace = %v, want started, two steps, finished", clustertest.RecordKinds(recs))
			}
			if o := recs[2].Observations[0]; o.Status != protocol.CallFailed || !strings.Contains(o.Content, "SIGKILL") {
				t.Errorf("the call after the death = %s %q, want failed saying how the server died", o.Status, o.Content)
			}
			if fin := recs[3]; fin.Kind != protocol.RecordFinished || fin.Reason != res.Reason {
				t.Errorf("finished record = %s %q, want the mcp error", fin.Kind, fin.Reason)
			}
			gone := r.waitEvent(t, protocol.EventMCPDisconnect, func(ev *protocol.Event) bool { return ev.IsError })
			if gone.Error == nil || gone.Error.Code != protocol.CodeMCP {
				t.Errorf("mcp_disconnect = %+v, want the mcp error", gone)
			}
			noServerLeft(t, r.marker)
		})
	}
}

// TestMCPCancelMidCall cancels a run while a call of the server runs: the
// run ends cancelled and nothing of the server is left.
func TestMCPCancelMidCall(t *testing.T) {
	for _, be := range mcpBackends {
		t.Run(be.name, func(t *testing.T) {
			agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{call("1", "mcp__srv__sleep", `{"ms":600000}`)}})
			r := startMCP(t, be, agent)
			r.c.Sandbox.Limits.WallSecs = 900
			h := r.submit(t, "mcp-cancel-"+be.name)
			r.waitEvent(t, protocol.EventToolCall, func(ev *protocol.Event) bool { return ev.Tool == "mcp__srv__sleep" })
			if _, err := h.Cancel(t.Context(), "", "enough"); err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeCancelled {
				t.Fatalf("outcome = %s (%s), want cancelled", res.Outcome, res.Reason)
			}
			noServerLeft(t, r.marker)
		})
	}
}

// TestMCPServerRefused: a server whose command the policy does not allow
// is never started, and a backend that cannot hold one fails the run
// rather than run it unsandboxed.
func TestMCPServerRefused(t *testing.T) {
	ws := t.TempDir()
	argv, env := mcptest.Install(t, ws)
	agent := provider.NewScripted(&protocol.Turn{Text: "Done."})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, AllowFloor: true})

	c := mcpContract(ws, "floor", argv, env, "")
	c.Policy.Layers[0].Rules = append(c.Policy.Layers[0].Rules, protocol.Rule{Act: "exec", Effect: "deny", Pattern: "./.mcp/*"})
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("mcp-cmd-denied"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeRefused || !strings.Contains(res.Reason, `MCP server "srv"`) || !strings.Contains(res.Reason, "./.mcp/*") {
		t.Errorf("a server whose command is denied: %s (%s), want refused naming the server", res.Outcome, res.Reason)
	}
	if pid := mcptest.Find(argv[1]); pid != 0 {
		t.Errorf("the refused server runs as process %d", pid)
	}

	// A backend that runs commands only to completion (as docker does)
	// cannot hold the server: the run is refused before its first step,
	// the server never started outside a sandbox.
	ws2 := t.TempDir()
	argv2, env2 := mcptest.Install(t, ws2)
	cl2 := clustertest.Start(t, harness.Config{Roots: []string{ws2}, Provider: agent, NoTakeover: true, AllowFloor: true,
		Backends: []sandbox.Backend{runOnly{floor.New()}}})
	h, err = cl2.Submit(t.Context(), mcpContract(ws2, "floor", argv2, env2, ""), harness.WithRunID("mcp-no-starter"))
	if err != nil {
		t.Fatal(err)
	}
	res, err = h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeRefused || res.Steps != 0 || !strings.HasPrefix(res.Reason, "unsupported") || !strings.Contains(res.Reason, "cannot hold the MCP stdio server") {
		t.Errorf("a server on a backend that runs commands to completion: %s after %d steps (%s), want refused before step 1, unsupported", res.Outcome, res.Steps, res.Reason)
	}
	if pid := mcptest.Find(argv2[1]); pid != 0 {
		t.Errorf("the server runs as process %d on a backend that cannot hold it", pid)
	}
}

// runOnly is a backend that runs commands to completion and starts none
// that lives on (it is no sandbox.Starter), as the docker backend.
type runOnly struct{ sandbox.Backend }

// TestMCPHTTPServer dials a server over streamable HTTP under a net allow
// of its host, calls a tool of it, and is refused under a net deny.
func TestMCPHTTPServer(t *testing.T) {
	url := mcptest.HTTP(t)
	ws := t.TempDir()
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
		if n == 1 {
			if toolNamed(req.Tools, "mcp__srv__echo") == nil {
				return nil, fmt.Errorf("mcp__srv__echo is not offered: %v", names(req.Tools))
			}
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("1", "mcp__srv__echo", `{"text":"over http"}`)}}, nil
		}
		return &protocol.Turn{Text: "Done."}, nil
	})
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true, AllowFloor: true})
	r := &mcpRun{cl: cl, ws: ws, c: mcpContract(ws, "auto", nil, nil, url)}
	h := r.submit(t, "mcp-http")
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
	conn := r.waitEvent(t, protocol.EventMCPConnect, func(ev *protocol.Event) bool { return ev.Target == "srv" })
	if conn.Text != "http" {
		t.Errorf("mcp_connect text = %q, want http", conn.Text)
	}

	denied := mcpContract(ws, "auto", nil, nil, url)
	denied.Policy.Layers[0].Rules = append(denied.Policy.Layers[0].Rules, protocol.Rule{Act: "net", Effect: "deny", Pattern: "127.0.0.1"})
	h, err = cl.Submit(t.Context(), denied, harness.WithRunID("mcp-http-denied"))
	if err != nil {
		t.Fatal(err)
	}
	res, err = h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeRefused || !strings.Contains(res.Reason, "net") {
		t.Errorf("a server whose host is denied: %s (%s), want refused by the net rule", res.Outcome, res.Reason)
	}
}

// TestMCPApprovalReopensTheServer asks a person about a call of a server's
// tool: the run pauses (its workspace and its server closed), and once
// approved the server is started again, with the env the trace does not
// keep, for the approved call and those after it.
func TestMCPApprovalReopensTheServer(t *testing.T) {
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
		switch n {
		case 1:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("d", "mcp__srv__delete_thing", `{"name":"old"}`)}}, nil
		case 2:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("e", "mcp__srv__echo", `{"text":"after"}`)}}, nil
		}
		return &protocol.Turn{Text: "Done."}, nil
	})
	r := startMCP(t, mcpBackends[0], agent)
	r.c.Policy.Layers[0].Rules[1].Effect = "ask" // delete_* asks a person
	h := r.submit(t, "mcp-approval")
	res, err := h.Wait(t.Context())
	if err != nil || res.Outcome != protocol.OutcomeAwaitingApproval {
		t.Fatalf("first wait = %+v, %v; want awaiting_approval", res, err)
	}
	noServerLeft(t, r.marker) // a paused run holds nothing
	if _, err := h.Decide(t.Context(), protocol.ApprovalID(h.ID(), 1, 0), &protocol.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if st := clustertest.WaitSettled(t, r.cl.Client, h.ID()); st.Outcome != protocol.OutcomeFinished {
		t.Fatalf("after the approval = %s (%s), want finished", st.Outcome, st.Reason)
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range recs {
		for _, o := range rec.Observations {
			got = append(got, string(o.State())+" "+o.Content)
		}
	}
	want := []string{"ok deleted old", "ok echo: after (" + mcptest.Seen(secretGreeting) + ")"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("observations = %q, want %q among them", got, w)
		}
	}
	if n := len(r.eventsOf(protocol.EventMCPConnect)); n != 2 {
		t.Errorf("%d mcp_connect events, want 2: the server started, closed with the pause, started again", n)
	}
	noServerLeft(t, r.marker)
}

// TestMCPSessionSharedByTheTree has a root run and its sub-agent call the
// server: both are answered by the one server process the root's open
// started, and it is closed once the tree has ended.
func TestMCPSessionSharedByTheTree(t *testing.T) {
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, n int) (*protocol.Turn, error) {
		task := req.Messages[0].Content
		last := req.Messages[len(req.Messages)-1]
		child := strings.Contains(task, "Task: ask the server")
		switch {
		case child && last.Role == protocol.RoleUser:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("ci", "mcp__srv__instance", `{}`),
				call("cw", "write_file", `{"path":"child.txt","content":"ok"}`)}}, nil
		case child:
			return &protocol.Turn{Text: "Done."}, nil
		case last.Role == protocol.RoleUser:
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{call("ri", "mcp__srv__instance", `{}`),
				call("s", "spawn_agent", `{"goal":"ask the server","verify_file":"child.txt","verify_contains":"ok","max_steps":3}`)}}, nil
		}
		return &protocol.Turn{Text: "Done."}, nil
	})
	r := startMCP(t, mcpBackends[0], agent)
	r.c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 2, MaxSteps: 10}
	r.c.Policy.Layers[0].Rules = append(r.c.Policy.Layers[0].Rules, protocol.Rule{Act: "write", Effect: "allow", Pattern: "child.txt"})
	h := r.submit(t, "mcp-tree")
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("root = %s (%s), want finished", res.Outcome, res.Reason)
	}
	instances := map[string]string{}
	runs, err := r.cl.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range runs {
		recs, err := r.cl.Run(st.Run).Trace(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			for _, o := range rec.Observations {
				if o.Tool == "mcp__srv__instance" {
					instances[st.Run] = string(o.State()) + " " + o.Content
				}
			}
		}
	}
	if len(instances) != 2 {
		t.Fatalf("instance calls by run = %v, want the root's and its sub-agent's", instances)
	}
	var seen []string
	for _, v := range instances {
		seen = append(seen, v)
	}
	if seen[0] != seen[1] || !strings.HasPrefix(seen[0], "ok instance ") {
		t.Errorf("the root and its sub-agent were answered by %q, want one server process for the tree", seen)
	}
	noServerLeft(t, r.marker)
}

// TestMCPServerFailsToStart: a server that exits before it answers fails
// the run with the typed mcp error, which names the server, how it ended
// and what it said.
func TestMCPServerFailsToStart(t *testing.T) {
	for _, be := range mcpBackends {
		t.Run(be.name, func(t *testing.T) {
			ws := t.TempDir()
			cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: provider.NewScripted(&protocol.Turn{Text: "Done."}),
				NoTakeover: true, Backends: be.start(t), AllowFloor: be.name == "floor"})
			c := mcpContract(ws, be.name, []string{"sh", "-c", "echo no token given >&2; exit 3"}, nil, "")
			c.Policy.Layers[0].Rules = append(c.Policy.Layers[0].Rules, protocol.Rule{Act: "exec", Effect: "allow", Pattern: "sh*"})
			h, err := cl.Submit(t.Context(), c, harness.WithRunID("mcp-broken-"+be.name))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Wait(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != protocol.OutcomeFailed || !strings.HasPrefix(res.Reason, "mcp:") || !strings.Contains(res.Reason, `"srv"`) ||
				!strings.Contains(res.Reason, "exit status 3") || !strings.Contains(res.Reason, "no token given") {
				t.Errorf("a server that exits at once: %s (%s), want failed with the mcp error, its status and its standard error", res.Outcome, res.Reason)
			}
			recs, err := h.Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if fin := recs[len(recs)-1]; fin.Kind != protocol.RecordFinished || fin.Reason != res.Reason {
				t.Errorf("the trace ends %s %q, want the mcp error", fin.Kind, fin.Reason)
			}
		})
	}
}
