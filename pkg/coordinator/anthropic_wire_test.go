package coordinator_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/ledger"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// anthropicWire is a Messages API server scripted by call: it answers the
// n-th request with the n-th list of server-sent events and keeps every
// request body it was sent.
type anthropicWire struct {
	t      *testing.T
	mu     sync.Mutex
	bodies [][]byte
	script [][]string // per call, the data of each event
}

func (w *anthropicWire) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	n := len(w.bodies)
	w.bodies = append(w.bodies, body)
	w.mu.Unlock()
	if n >= len(w.script) {
		http.Error(rw, `{"type":"error","error":{"type":"invalid_request_error","message":"unscripted call"}}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	if !req.Stream {
		http.Error(rw, `{"type":"error","error":{"type":"invalid_request_error","message":"this server only streams"}}`, http.StatusBadRequest)
		return
	}
	rw.Header().Set("Content-Type", "text/event-stream")
	for _, data := range w.script[n] {
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			w.t.Errorf("scripted event is not JSON: %s", data)
		}
		fmt.Fprintf(rw, "event: %s\ndata: %s\n\n", ev.Type, data)
	}
}

// request returns the n-th request body decoded.
func (w *anthropicWire) request(n int) map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n >= len(w.bodies) {
		w.t.Fatalf("the server got %d requests, want at least %d", len(w.bodies), n+1)
	}
	var m map[string]any
	if err := json.Unmarshal(w.bodies[n], &m); err != nil {
		w.t.Fatal(err)
	}
	return m
}

// stream is the events of one answer: message_start, the blocks, and the
// message_delta with its stop reason.
func stream(stop string, blocks ...[]string) []string {
	evs := []string{`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":100,"output_tokens":1}}}`}
	for _, b := range blocks {
		evs = append(evs, b...)
	}
	return append(evs, `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":60}}`,
		`{"type":"message_stop"}`)
}

// startWire runs a cluster whose worker talks to an Anthropic-wire server
// with the script, and a verification-free contract on ws that may write
// and dial the server.
func startWire(t *testing.T, ws string, w *anthropicWire, thinking int) (*harness.Cluster, *protocol.Contract) {
	t.Helper()
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	p, err := provider.NewAnthropic(provider.AnthropicConfig{APIKey: "test-key", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: p, NoTakeover: true})
	c := contract(ws)
	// The worker dials the server under the run's policy.
	c.Policy.Layers = []protocol.Layer{{Name: "model", Rules: []protocol.Rule{{Act: "net", Effect: "allow", Pattern: strings.TrimPrefix(srv.URL, "http://")}}}}
	c.Provider = protocol.ProviderSpec{Model: "claude-test", MaxOutputTokens: 8192}
	if thinking > 0 {
		c.Provider.Thinking = &protocol.ThinkingSpec{BudgetTokens: thinking}
	}
	return cl, c
}

// TestThinkingSentBackSigned runs a model with extended thinking on and
// tools over the Anthropic wire: the thinking budget is asked for, and the
// signed thinking block and the redacted one that came with a tool call
// go back with the next request first in the assistant turn, byte for
// byte, while the thinking text reaches neither the tool nor the events.
func TestThinkingSentBackSigned(t *testing.T) {
	const (
		thought   = "The test wants done.txt; write it."
		signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
		redacted  = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
	)
	w := &anthropicWire{t: t, script: [][]string{
		stream("tool_use",
			[]string{`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The test wants done.txt; "}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"write it."}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"` + signature + `"}}`,
				`{"type":"content_block_stop","index":0}`},
			[]string{`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"` + redacted + `"}}`,
				`{"type":"content_block_stop","index":1}`},
			[]string{`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"write_file","input":{}}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"done.txt\","}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"content\":\"x\"}"}}`,
				`{"type":"content_block_stop","index":2}`}),
		stream("end_turn",
			[]string{`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Written."}}`,
				`{"type":"content_block_stop","index":0}`}),
	}}
	ws := t.TempDir()
	cl, c := startWire(t, ws, w, 2048)
	var events []string
	var mu sync.Mutex
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("thinks"), harness.WithObserver(func(ev *protocol.Event) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(ev)
		events = append(events, string(b))
	}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 2 {
		t.Fatalf("run = %s after %d steps (%s), want finished after 2", res.Outcome, res.Steps, res.Reason)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "done.txt")); err != nil || string(got) != "x" {
		t.Errorf("done.txt = %q, %v; want the call carried out", got, err)
	}

	first := w.request(0)
	if th, _ := first["thinking"].(map[string]any); th["type"] != "enabled" || th["budget_tokens"] != float64(2048) {
		t.Errorf("first request thinking = %v, want enabled with 2048", first["thinking"])
	}
	msgs, _ := w.request(1)["messages"].([]any)
	if len(msgs) < 3 {
		t.Fatalf("second request has %d messages, want the task, the turn and its result", len(msgs))
	}
	turn, _ := msgs[1].(map[string]any)
	content, _ := turn["content"].([]any)
	if turn["role"] != "assistant" || len(content) < 3 {
		t.Fatalf("second request's turn = %v, want an assistant message of three blocks", turn)
	}
	wantBlocks := []map[string]any{
		{"type": "thinking", "thinking": thought, "signature": signature},
		{"type": "redacted_thinking", "data": redacted},
	}
	for i, want := range wantBlocks {
		got, _ := content[i].(map[string]any)
		if !sameJSON(got, want) {
			t.Errorf("turn block %d = %v, want %v, unchanged", i, got, want)
		}
	}
	if use, _ := content[2].(map[string]any); use["type"] != "tool_use" || use["id"] != "toolu_01" {
		t.Errorf("turn block 2 = %v, want the tool_use after the thinking", content[2])
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range events {
		if strings.Contains(ev, thought) || strings.Contains(ev, signature) {
			t.Errorf("an event carries the thinking: %s", ev)
		}
	}
}

// TestCutToolCallNotRunOverTheWire: a model that stops on max_tokens in
// the middle of a tool call's input (Anthropic's stream, the input's JSON
// never closed) has that call not carried out, and the next request tells
// it why in the call's result.
func TestCutToolCallNotRunOverTheWire(t *testing.T) {
	w := &anthropicWire{t: t, script: [][]string{
		stream("max_tokens",
			[]string{`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_cut","name":"write_file","input":{}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"cut.txt\",\"content\":\"the first half of a lo"}}`}),
		stream("end_turn",
			[]string{`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Giving up."}}`,
				`{"type":"content_block_stop","index":0}`}),
	}}
	ws := t.TempDir()
	cl, c := startWire(t, ws, w, 0)
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("cut-call"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || res.Steps != 2 {
		t.Fatalf("run = %s after %d steps (%s), want finished after 2", res.Outcome, res.Steps, res.Reason)
	}
	if _, err := os.Stat(filepath.Join(ws, "cut.txt")); err == nil {
		t.Errorf("cut.txt was written by a call cut off at max_tokens")
	}
	if obs := observation(t, h, "toolu_cut"); obs == nil || obs.State() != protocol.CallNotRun {
		t.Errorf("the cut call's observation = %+v, want not_run", obs)
	}
	msgs, _ := w.request(1)["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	blocks, _ := last["content"].([]any)
	result, _ := blocks[0].(map[string]any)
	if result["type"] != "tool_result" || result["tool_use_id"] != "toolu_cut" || !strings.Contains(fmt.Sprint(result["content"]), "cut off") {
		t.Errorf("the second request's last block = %v, want the cut call's result saying it was cut off", result)
	}
}

func sameJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestPromptCacheOverTheWire runs three steps over the Anthropic wire: each
// request carries its cache breakpoints on the system prompt and the last
// message, the transcript before the last turn is the same bytes from one
// request to the next (so the cache holds), and the cache reads and
// writes the server reports are recorded apart and priced at their own
// rates.
func TestPromptCacheOverTheWire(t *testing.T) {
	read := func(id, path string) []string {
		return []string{`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"` + id + `","name":"read_file","input":{}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"` + path + `\"}"}}`,
			`{"type":"content_block_stop","index":0}`}
	}
	cached := func(evs []string) []string {
		evs[0] = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,` +
			`"usage":{"input_tokens":100,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":1}}}`
		return evs
	}
	w := &anthropicWire{t: t, script: [][]string{
		cached(stream("tool_use", read("toolu_1", "a.txt"))),
		cached(stream("tool_use", read("toolu_2", "b.txt"))),
		cached(stream("end_turn", []string{`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"done"}}`, `{"type":"content_block_stop","index":0}`})),
	}}
	ws := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("content of "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	p, err := provider.NewAnthropic(provider.AnthropicConfig{APIKey: "test-key", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	prices := ledger.Prices{"claude-test": {InputPerMillion: 3_000_000, OutputPerMillion: 15_000_000, CachedInputPerMillion: 300_000, CacheWritePerMillion: 3_750_000}}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: p, NoTakeover: true, Prices: prices})
	c := contract(ws)
	c.Policy.Layers = []protocol.Layer{{Name: "model", Rules: []protocol.Rule{{Act: "net", Effect: "allow", Pattern: strings.TrimPrefix(srv.URL, "http://")}}}}
	c.Provider = protocol.ProviderSpec{Model: "claude-test", MaxOutputTokens: 1024}
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("cached"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.Wait(t.Context()); err != nil || res.Outcome != protocol.OutcomeFinished || res.Steps != 3 {
		t.Fatalf("run = %+v, %v; want finished after 3", res, err)
	}
	var prev []any
	for n := range 3 {
		req := w.request(n)
		sys, _ := req["system"].([]any)
		if len(sys) != 1 || sys[0].(map[string]any)["cache_control"] == nil {
			t.Errorf("request %d: system %v, want one block with a breakpoint", n+1, req["system"])
		}
		msgs, _ := req["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		blocks, _ := last["content"].([]any)
		if b, _ := blocks[len(blocks)-1].(map[string]any); b["cache_control"] == nil {
			t.Errorf("request %d: the last block %v has no breakpoint", n+1, b)
		}
		// Without the breakpoints, what came before stays the same bytes.
		for _, m := range msgs {
			for _, b := range m.(map[string]any)["content"].([]any) {
				delete(b.(map[string]any), "cache_control")
			}
		}
		if prev != nil {
			x, _ := json.Marshal(prev)
			y, _ := json.Marshal(msgs[:len(prev)])
			if string(x) != string(y) {
				t.Errorf("request %d changed the transcript before it:\n%s\nwas\n%s", n+1, y, x)
			}
		}
		prev = msgs
	}
	recs, err := h.Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Kind != protocol.RecordStep {
			continue
		}
		u := r.Turn.Usage
		// 100 plain at 3, 1,000 read at 0.3, 200 written at 3.75, 60 out at 15 (per million, in micro-units).
		if u.InputTokens != 1300 || u.CachedTokens != 1000 || u.CacheWriteTokens != 200 || r.Cost == nil || r.Cost.Micros != 300+300+750+900 {
			t.Errorf("step %d: usage %+v, cost %+v; want 1,300 in (1,000 read, 200 written) costing 2250", r.Step, u, r.Cost)
		}
	}
}
