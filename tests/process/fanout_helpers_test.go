package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// The agent tree of the fan-out tests: a root whose first turn asks for n
// sub-agents at once (spawn_agent calls spawn_c000, spawn_c001, ...), each
// sub-agent cK extending its own file cK.txt in two edits, then the root
// ending without a tool. The model is an OpenAI-compatible server in the
// test process (fanModel), which every worker and harness process the
// test starts calls: it scripts each agent by its task, can hold chosen
// calls until released, and counts every call it answered.

// fanCall names one provider call of the tree: the agent (root, or a
// sub-agent's name c000...) and its turn, counted from 0 by the assistant
// messages its request already holds.
type fanCall struct {
	agent string
	turn  int
}

func (c fanCall) String() string { return fmt.Sprintf("%s turn %d", c.agent, c.turn) }

// fanRoot is the name of the root agent in fanCall.
const fanRoot = "root"

// childName is the name of the k-th sub-agent, and of its file.
func childName(k int) string { return fmt.Sprintf("c%03d", k) }

// childGoal is the goal the root gives its k-th sub-agent.
func childGoal(k int) string { return "part " + childName(k) }

// childRun is the run id of the k-th sub-agent of root, started by its
// first step: <run>-s<step>c<call> (docs/contract.md).
func childRun(root string, k int) string { return fmt.Sprintf("%s-s1c%d", root, k) }

// childContent is what cK.txt holds after its sub-agent committed steps
// steps: one line per step on top of the line the test wrote. An edit
// made twice shows as a line twice.
func childContent(k, steps int) string {
	name := childName(k)
	lines := []string{name + ":0"}
	if steps >= 1 {
		lines = append(lines, name+":1")
	}
	if steps >= 2 {
		lines = append(lines, name+":2 done")
	}
	return strings.Join(lines, "\n") + "\n"
}

// fanWorkspace makes a workspace holding the n sub-agents' files, each
// at its first line.
func fanWorkspace(t *testing.T, n int) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for k := range n {
		if err := os.WriteFile(filepath.Join(ws, childName(k)+".txt"), []byte(childContent(k, 0)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// fanContract is the root's contract: fan out to n sub-agents on ws under
// the tree budget tree; verification none, so the root finishes when it
// answers without a tool.
func fanContract(ws string, n int, tree protocol.TreeBudget, maxOutput int) *protocol.Contract {
	return &protocol.Contract{Schema: protocol.ContractSchema,
		Task:         fmt.Sprintf("Fan out: ask for %d sub-agents at once, one per part, and report when all are back.", n),
		Workspace:    protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}},
		Budget:       protocol.Budget{MaxSteps: 3, Tree: &tree},
		Provider:     protocol.ProviderSpec{MaxOutputTokens: maxOutput},
		Policy:       &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "allow", Exec: "deny", Net: "deny"}}}
}

// fanModel is the tree's model: an OpenAI-compatible chat completions
// server, streamed or not.
type fanModel struct {
	srv      *httptest.Server
	children int
	// usage is what a call reports it used; fixed when nil.
	usage func(c fanCall) (in, out int64, err error)

	mu       sync.Mutex
	hold     func(c fanCall) bool      // picks the calls to hold; nil: none
	gates    map[fanCall]chan struct{} // a held call's gate, closed when it is let through
	let      map[fanCall]bool          // calls let through, never held again
	stopped  bool                      // release: nothing is held any more
	held     map[fanCall]int           // calls waiting at their gates now
	served   map[fanCall]int           // calls answered in full
	spent    map[fanCall][2]int64      // usage reported per call, summed
	cut      map[fanCall]int           // calls whose caller went away while held
	unknown  []string                  // requests no agent of the tree made
	failures []string                  // calls the model could not answer
}

// fixedIn and fixedOut are the tokens a call reports when fanModel.usage
// is nil.
const fixedIn, fixedOut = 200, 10

// newFanModel starts the model for a tree of n sub-agents; hold, when not
// nil, picks the calls to hold until they are let through; usage, when not
// nil, says what each call reports it used.
func newFanModel(t *testing.T, n int, hold func(fanCall) bool, usage func(fanCall) (in, out int64, err error)) *fanModel {
	t.Helper()
	m := &fanModel{children: n, hold: hold, usage: usage, gates: map[fanCall]chan struct{}{}, let: map[fanCall]bool{},
		held: map[fanCall]int{}, served: map[fanCall]int{}, spent: map[fanCall][2]int64{}, cut: map[fanCall]int{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() {
		m.release()
		m.srv.Close()
	})
	return m
}

// env is what a process needs to call the model: the OpenAI provider
// alone, at this server.
func (m *fanModel) env() []string {
	return []string{"HARNESS_PROVIDERS=openai", "OPENAI_API_KEY=sk-fan-test", "OPENAI_BASE_URL=" + m.srv.URL + "/v1", "OPENAI_MODEL=fan-model"}
}

// release answers the calls held and holds no more.
func (m *fanModel) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	for c, g := range m.gates {
		close(g)
		delete(m.gates, c)
	}
}

// letThrough answers the call c if it is held, and holds it no more.
func (m *fanModel) letThrough(c fanCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.let[c] = true
	if g, ok := m.gates[c]; ok {
		close(g)
		delete(m.gates, c)
	}
}

// heldNow lists the calls waiting for the release.
func (m *fanModel) heldNow() []fanCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fanCall
	for c, n := range m.held {
		for range n {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b fanCall) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// servedCalls returns how many times each call was answered in full and
// what the answers reported, summed.
func (m *fanModel) servedCalls() (map[fanCall]int, ledger.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var u ledger.Usage
	for _, s := range m.spent {
		u = u.Add(ledger.Usage{InputTokens: s[0], OutputTokens: s[1]})
	}
	return maps.Clone(m.served), u
}

// cutCalls returns the held calls whose caller went away.
func (m *fanModel) cutCalls() map[fanCall]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.cut)
}

// problems lists requests the model could not place or answer.
func (m *fanModel) problems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append(append([]string(nil), m.unknown...), m.failures...)
}

// chatRequest is the part of an OpenAI chat completions request the model
// reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

var childTask = regexp.MustCompile(`Task: part (c[0-9]{3})\b`)

// callOf places a request in the tree.
func callOf(req *chatRequest) (fanCall, bool) {
	var c fanCall
	for _, msg := range req.Messages {
		switch msg.Role {
		case "assistant":
			c.turn++
		case "user":
			if c.agent != "" {
				continue
			}
			if sub := childTask.FindSubmatch(msg.Content); sub != nil {
				c.agent = string(sub[1])
			} else if strings.Contains(string(msg.Content), "Task: Fan out") {
				c.agent = fanRoot
			}
		}
	}
	return c, c.agent != ""
}

// turnFor is the scripted turn of a call: the text, the tool calls (name
// and arguments) and the finish reason.
func (m *fanModel) turnFor(c fanCall) (string, [][2]string, string) {
	if c.agent == fanRoot {
		if c.turn > 0 {
			return "Every part has reported back.", nil, "stop"
		}
		var calls [][2]string
		for k := range m.children {
			args, _ := json.Marshal(map[string]any{"goal": childGoal(k), "verify_file": childName(k) + ".txt",
				"verify_contains": childName(k) + ":2 done", "max_steps": 3})
			calls = append(calls, [2]string{"spawn_agent", string(args)})
		}
		return fmt.Sprintf("Starting %d sub-agents.", m.children), calls, "tool_calls"
	}
	file := c.agent + ".txt"
	edit := func(from, to string) [][2]string {
		args, _ := json.Marshal(map[string]string{"path": file, "search": from, "replace": to})
		return [][2]string{{"edit_file", string(args)}}
	}
	switch c.turn {
	case 0:
		return "First line.", edit(c.agent+":0\n", c.agent+":0\n"+c.agent+":1\n"), "tool_calls"
	case 1:
		return "Second line.", edit(c.agent+":1\n", c.agent+":1\n"+c.agent+":2 done\n"), "tool_calls"
	}
	return "Done.", nil, "stop"
}

// callID is the id of a turn's i-th tool call: spawn_cK for the root's
// spawns, so an observation names its sub-agent.
func callID(c fanCall, name string, i int) string {
	if name == "spawn_agent" {
		return "spawn_" + childName(i)
	}
	return fmt.Sprintf("call_%s_%d_%d", c.agent, c.turn, i)
}

func (m *fanModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	c, ok := callOf(&req)
	if !ok {
		m.mu.Lock()
		m.unknown = append(m.unknown, fmt.Sprintf("a request of %d messages from no agent of the tree", len(req.Messages)))
		m.mu.Unlock()
		http.Error(w, `{"error":{"message":"unknown agent","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	var gate chan struct{}
	if hold := !m.stopped && !m.let[c] && m.hold != nil && m.hold(c); hold {
		if gate = m.gates[c]; gate == nil {
			gate = make(chan struct{})
			m.gates[c] = gate
		}
		m.held[c]++
	}
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
			m.mu.Lock()
			m.held[c]--
			if m.held[c] == 0 {
				delete(m.held, c)
			}
			m.mu.Unlock()
		case <-r.Context().Done():
			m.mu.Lock()
			m.held[c]--
			if m.held[c] == 0 {
				delete(m.held, c)
			}
			m.cut[c]++
			m.mu.Unlock()
			return
		}
	}
	in, out := int64(fixedIn), int64(fixedOut)
	if m.usage != nil {
		var err error
		if in, out, err = m.usage(c); err != nil {
			m.mu.Lock()
			m.failures = append(m.failures, fmt.Sprintf("%s: %v", c, err))
			m.mu.Unlock()
			http.Error(w, `{"error":{"message":"no usage","type":"server_error"}}`, http.StatusInternalServerError)
			return
		}
	}
	text, calls, finish := m.turnFor(c)
	if err := writeTurn(w, req, c, text, calls, finish, in, out); err != nil {
		return // the caller went away mid-answer: not served
	}
	m.mu.Lock()
	m.served[c]++
	s := m.spent[c]
	m.spent[c] = [2]int64{s[0] + in, s[1] + out}
	m.mu.Unlock()
}

// writeTurn answers a chat completion, as a stream when it asked for one.
func writeTurn(w http.ResponseWriter, req chatRequest, c fanCall, text string, calls [][2]string, finish string, in, out int64) error {
	usage := map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
	var toolCalls []map[string]any
	for i, call := range calls {
		toolCalls = append(toolCalls, map[string]any{"id": callID(c, call[0], i), "type": "function",
			"function": map[string]any{"name": call[0], "arguments": call[1]}})
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": text}
		if len(toolCalls) > 0 {
			msg["tool_calls"] = toolCalls
		}
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-fan", "object": "chat.completion", "model": req.Model,
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
	}
	w.Header().Set("Content-Type", "text/event-stream")
	var werr error
	chunk := func(delta map[string]any, finish, usage any) {
		choices := []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}
		if delta == nil {
			choices = []map[string]any{}
		}
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-fan", "object": "chat.completion.chunk", "model": req.Model, "choices": choices, "usage": usage})
		if werr == nil {
			_, werr = w.Write([]byte("data: " + string(b) + "\n\n"))
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	chunk(map[string]any{"content": text}, nil, nil)
	for i, call := range toolCalls {
		call["index"] = i
		chunk(map[string]any{"tool_calls": []map[string]any{call}}, nil, nil)
	}
	chunk(map[string]any{}, finish, nil)
	chunk(nil, nil, usage)
	if werr == nil {
		_, werr = w.Write([]byte("data: [DONE]\n\n"))
	}
	if f, ok := w.(http.Flusher); ok && werr == nil {
		f.Flush()
	}
	return werr
}

// taskSizes records the size of every step task published on the bus,
// by its draw key, from which the coordinator that published it estimated
// the call (budget.go: a token per four bytes, plus one, plus the
// contract's output cap).
type taskSizes struct {
	mu    sync.Mutex
	sizes map[string]int // run.step.attempt -> bytes, published whole
	// whole is each run's last request, whole, and the transcript that
	// names it: a task that extends it carries only the rest.
	whole map[string]wholeRequest
	// seen is closed, and replaced, each time a task is recorded.
	seen chan struct{}
	bad  []string
}

// wholeRequest is a run's last request whole, named by its task.
type wholeRequest struct {
	transcript string
	req        protocol.CompletionRequest
}

// watchTasks subscribes to every pool's step tasks on nc.
func watchTasks(t *testing.T, nc *nats.Conn) *taskSizes {
	t.Helper()
	ts := &taskSizes{sizes: map[string]int{}, whole: map[string]wholeRequest{}, seen: make(chan struct{})}
	sub, err := nc.Subscribe("harness.steps.>", func(msg *nats.Msg) {
		var task protocol.StepTask
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if err := json.Unmarshal(msg.Data, &task); err != nil {
			ts.bad = append(ts.bad, err.Error())
			return
		}
		key := protocol.StepKey(task.Run, task.Step, task.Attempt)
		if b := task.Base; b != nil {
			// What the reservation was estimated on: the task whole.
			prev, ok := ts.whole[task.Run]
			if !ok || prev.transcript != b.Transcript || len(prev.req.Messages) < b.Messages {
				ts.bad = append(ts.bad, fmt.Sprintf("%s extends %s, which was not the run's last task", key, b.Transcript))
				return
			}
			task.Request.Messages = append(append([]protocol.Message(nil), prev.req.Messages[:b.Messages]...), task.Request.Messages...)
			if b.Frame {
				task.Request.System, task.Request.Tools = prev.req.System, prev.req.Tools
			}
			task.Base = nil
		}
		ts.whole[task.Run] = wholeRequest{task.Transcript, task.Request}
		size := len(msg.Data)
		if data, err := json.Marshal(&task); err == nil {
			size = len(data)
		}
		if n, ok := ts.sizes[key]; ok && n != size {
			ts.bad = append(ts.bad, fmt.Sprintf("%s published as %d bytes and as %d", key, n, size))
		}
		ts.sizes[key] = size
		close(ts.seen)
		ts.seen = make(chan struct{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ts
}

// latest returns the key and size of the latest attempt of a step seen,
// waiting up to wait for one.
func (ts *taskSizes) latest(run string, step int, wait time.Duration) (string, int, bool) {
	timeout := time.After(wait)
	for {
		ts.mu.Lock()
		seen := ts.seen
		key, size := "", 0
		for a := 1; ; a++ {
			n, ok := ts.sizes[protocol.StepKey(run, step, a)]
			if !ok {
				break
			}
			key, size = protocol.StepKey(run, step, a), n
		}
		ts.mu.Unlock()
		if key != "" {
			return key, size, true
		}
		select { // the subscription is a hop behind the worker that took the task
		case <-seen:
		case <-timeout:
			return "", 0, false
		}
	}
}

// size returns the size of the step task of a draw key.
func (ts *taskSizes) size(key string) (int, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n, ok := ts.sizes[key]
	return n, ok
}

// problems lists the step tasks that did not decode, or were published
// twice with different sizes.
func (ts *taskSizes) problems() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.bad...)
}

// estimateOf is what the coordinator reserves for a step task of size
// bytes with the given output cap (pkg/coordinator/budget.go estimate).
func estimateOf(size, maxOutput int) ledger.Usage {
	return ledger.Usage{InputTokens: int64(size/4 + 1), OutputTokens: int64(maxOutput), Steps: 1}
}

// dialData connects to the harness process serving data (harness run or
// harness resume), through the socket it opened there.
func dialData(t *testing.T, data string) (*harness.Client, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "server.json"))
	if err != nil {
		return nil, err
	}
	var s struct{ URL, Socket, User, Password string }
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if s.Socket == "" {
		return nil, fmt.Errorf("the process serving %s opened no socket", data)
	}
	return harness.DialSocket(t.Context(), s.Socket, s.User, s.Password, nats.MaxReconnects(0))
}

// treeOf returns the runs of the index in root's tree, root first, then
// by id.
func treeOf(runs []protocol.RunState, root string) []protocol.RunState {
	var out []protocol.RunState
	for _, st := range runs {
		if st.Run == root || st.Tree == root {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b protocol.RunState) int {
		switch {
		case a.Run == root:
			return -1
		case b.Run == root:
			return 1
		}
		return strings.Compare(a.Run, b.Run)
	})
	return out
}

// describeTree renders a tree's runs for a failure message.
func describeTree(runs []protocol.RunState) string {
	var b strings.Builder
	for _, st := range runs {
		fmt.Fprintf(&b, "\n  %s: %s %s at step %d on %q (%s)", st.Run, st.Status, st.Outcome, st.Step, st.Coordinator, clip(st.Reason, 160))
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// byRun indexes runs by id.
func byRun(runs []protocol.RunState) map[string]protocol.RunState {
	out := map[string]protocol.RunState{}
	for _, st := range runs {
		out[st.Run] = st
	}
	return out
}

// agentOf maps a run of root's tree to its agent's name in fanCall.
func agentOf(root string, n int) map[string]string {
	out := map[string]string{root: fanRoot}
	for k := range n {
		out[childRun(root, k)] = childName(k)
	}
	return out
}

// checkDrawsOnce checks every draw of the tree's traces is charged once:
// its key is run.step.attempt of the step that records it, no key is
// recorded twice, none charges a call lost with its worker. It returns
// what the draws add up to.
func checkDrawsOnce(t *testing.T, traces map[string][]protocol.Record) ledger.Usage {
	t.Helper()
	var sum ledger.Usage
	seen := map[string]string{}
	for run, recs := range traces {
		for _, r := range recs {
			for _, d := range r.Draws {
				where := fmt.Sprintf("%s step %d", run, r.Step)
				if prev, ok := seen[d.Key]; ok {
					t.Errorf("draw %s is recorded by %s and again by %s: charged twice", d.Key, prev, where)
				}
				seen[d.Key] = where
				if strings.Contains(d.Key, ".lost") {
					t.Errorf("%s charges %s as a call lost with its worker; no worker was lost", where, d.Key)
				}
				if !strings.HasPrefix(d.Key, fmt.Sprintf("%s.%d.", run, r.Step)) {
					t.Errorf("%s records draw %s, not one of its own attempts", where, d.Key)
				}
				sum = sum.Add(ledger.Usage{InputTokens: d.InputTokens, OutputTokens: d.OutputTokens, CostMicros: d.CostMicros, Steps: d.Steps})
			}
		}
	}
	return sum
}

// checkServedOnce checks the model answered exactly the calls the tree's
// traces committed, each once: no committed step's call was made again,
// and no answer went unrecorded. It also checks what the answers reported
// adds up to what the traces drew.
func checkServedOnce(t *testing.T, m *fanModel, agents map[string]string, traces map[string][]protocol.Record, drawn ledger.Usage) {
	t.Helper()
	served, reported := m.servedCalls()
	committed := map[fanCall]bool{}
	for run, recs := range traces {
		agent, ok := agents[run]
		if !ok {
			t.Errorf("a trace of run %s, which is no agent of the tree", run)
			continue
		}
		for _, r := range recs {
			if r.Kind != protocol.RecordStep {
				continue
			}
			c := fanCall{agent, r.Step - 1}
			committed[c] = true
			if n := served[c]; n != 1 {
				t.Errorf("the model answered %s (step %d of %s) %d times, want once", c, r.Step, run, n)
			}
		}
	}
	for c, n := range served {
		if !committed[c] {
			t.Errorf("the model answered %s %d times, and no trace committed it", c, n)
		}
	}
	if reported.InputTokens != drawn.InputTokens || reported.OutputTokens != drawn.OutputTokens {
		t.Errorf("the model's answers reported %d in and %d out tokens; the traces drew %d and %d", reported.InputTokens, reported.OutputTokens,
			drawn.InputTokens, drawn.OutputTokens)
	}
	if p := m.problems(); len(p) > 0 {
		t.Errorf("the model could not answer: %q", p)
	}
}

// checkComposed checks the root's spawning step composes every sub-agent's
// outcome back, in the order asked: an observation per spawn_agent call,
// each the outcome its sub-agent's index entry holds, or a refusal for a
// sub-agent that never started or never took a step. It returns the
// refused calls and the step's observations.
func checkComposed(t *testing.T, root string, n int, recs []protocol.Record, tree map[string]protocol.RunState) ([]int, []protocol.Observation) {
	t.Helper()
	var spawning *protocol.Record
	for i := range recs {
		if recs[i].Kind == protocol.RecordStep && recs[i].Step == 1 {
			spawning = &recs[i]
		}
	}
	if spawning == nil || spawning.Turn == nil {
		t.Fatalf("the root's trace has no first step: %v", kinds(recs))
	}
	if len(spawning.Turn.ToolCalls) != n || len(spawning.Observations) != n {
		t.Fatalf("the root's first step asked %d calls and observed %d, want %d of each", len(spawning.Turn.ToolCalls), len(spawning.Observations), n)
	}
	var refused []int
	for k, o := range spawning.Observations {
		run := childRun(root, k)
		st, started := tree[run]
		if o.CallID != "spawn_"+childName(k) {
			t.Errorf("observation %d answers %q, want spawn_%s: composed in the order asked", k, o.CallID, childName(k))
		}
		if strings.HasPrefix(o.Content, "[spawn refused] ") {
			refused = append(refused, k)
			if started && (st.Status != protocol.StatusCompleted || st.Step > 0) {
				t.Errorf("spawn %d is observed refused (%q) but its sub-agent %s ran: %s %s at step %d", k, o.Content, run, st.Status, st.Outcome, st.Step)
			}
			if o.State() != protocol.CallRefused {
				t.Errorf("refused spawn %d has status %s, want refused", k, o.State())
			}
			continue
		}
		if !started {
			t.Errorf("spawn %d is observed %q, but no sub-agent %s is in the index", k, o.Content, run)
			continue
		}
		want := fmt.Sprintf("[child %q -> %s after %d steps]", childGoal(k), st.Outcome, st.Step)
		if !strings.HasPrefix(o.Content, want) || !strings.Contains(o.Content, st.Reason[:min(len(st.Reason), 100)]) {
			t.Errorf("spawn %d is observed %q, want %s and its reason %q", k, o.Content, want, st.Reason)
		}
		wantState := protocol.CallOK
		if st.Outcome != protocol.OutcomeSuccess {
			wantState = protocol.CallFailed
		}
		if o.State() != wantState {
			t.Errorf("spawn %d has status %s, want %s for a sub-agent that ended %s", k, o.State(), wantState, st.Outcome)
		}
	}
	for run, st := range tree {
		if run == root {
			continue
		}
		if st.Parent != root {
			t.Errorf("run %s of the tree has parent %q, want %s", run, st.Parent, root)
		}
		known := false
		for k := range n {
			known = known || childRun(root, k) == run
		}
		if !known {
			t.Errorf("run %s is in the tree and no spawn of the root's first step started it", run)
		}
	}
	return refused, spawning.Observations
}

// checkFiles checks each sub-agent's file holds a line per step its
// sub-agent committed, each once.
func checkFiles(t *testing.T, ws, root string, n int, tree map[string]protocol.RunState) {
	t.Helper()
	for k := range n {
		steps := tree[childRun(root, k)].Step // zero for one that never started
		b, err := os.ReadFile(filepath.Join(ws, childName(k)+".txt"))
		if err != nil {
			t.Error(err)
			continue
		}
		if want := childContent(k, steps); string(b) != want {
			t.Errorf("%s.txt after %d committed steps = %q, want %q: every edit once", childName(k), steps, b, want)
		}
	}
}

func kinds(recs []protocol.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s %d", r.Kind, r.Step))
	}
	return out
}

// leaseHolders reads which coordinator holds the lease of each of runs,
// from the harness-leases bucket; a run with no lease is left out.
func leaseHolders(ctx context.Context, nc *nats.Conn, runs ...string) (map[string]string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, wire.BucketLeases)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, run := range runs {
		e, err := kv.Get(ctx, run)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var l struct {
			Owner string `json:"owner"`
		}
		if err := json.Unmarshal(e.Value(), &l); err != nil {
			return nil, fmt.Errorf("lease %s: %w", run, err)
		}
		out[run] = l.Owner
	}
	return out, nil
}
