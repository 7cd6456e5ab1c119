package provider

import (
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ioharness/harness/pkg/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// recordConversation records the conversation's three steps from a
// scripted provider and returns the recorder and the turns it returned.
func recordConversation(t *testing.T) (*Record, []*protocol.Turn) {
	t.Helper()
	script := conversation()
	var turns []*protocol.Turn
	for _, s := range script {
		turns = append(turns, s.turn)
	}
	rec := NewRecord(NewScripted(turns...))
	var got []*protocol.Turn
	for i, s := range script {
		turn, err := rec.Complete(t.Context(), s.req)
		if err != nil {
			t.Fatalf("call %d: Complete: %v", i+1, err)
		}
		got = append(got, turn)
	}
	return rec, got
}

func TestRecordThenReplay(t *testing.T) {
	rec, recorded := recordConversation(t)
	if rec.Name() != "scripted" {
		t.Errorf("Record.Name() = %q, want the wrapped provider's name", rec.Name())
	}
	path := filepath.Join(t.TempDir(), "run.cassette.json")
	if err := rec.Save(path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	rp, err := LoadReplay(path)
	if err != nil {
		t.Fatalf("LoadReplay: %v", err)
	}
	if rp.Name() != "replay" {
		t.Errorf("Replay.Name() = %q, want replay", rp.Name())
	}
	// Replay in another order than recorded: answers go by content.
	for _, i := range []int{2, 0, 1} {
		got, err := rp.Complete(t.Context(), conversation()[i].req)
		if err != nil {
			t.Fatalf("step %d: Complete: %v", i+1, err)
		}
		if got.Served != "replay" {
			t.Errorf("step %d: Served = %q, want replay", i+1, got.Served)
		}
		if diff := cmp.Diff(recorded[i], got, cmpopts.IgnoreFields(protocol.Turn{}, "Served")); diff != "" {
			t.Errorf("step %d: replayed turn differs from the recorded one (-recorded +replayed):\n%s", i+1, diff)
		}
	}
}

func TestRecordKeepsOnlySuccesses(t *testing.T) {
	p := NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if call == 2 {
			return nil, protocol.Errorf(protocol.CodeProviderServer, "down")
		}
		return &protocol.Turn{Text: req.Messages[0].Content}, nil
	})
	rec := NewRecord(p)
	for _, msg := range []string{"a", "b", "c"} {
		req := simpleRequest()
		req.Messages[0].Content = msg
		rec.Complete(t.Context(), req)
	}
	var got []string
	for _, ex := range rec.Exchanges() {
		got = append(got, ex.Request.Messages[0].Content+"="+ex.Turn.Text)
		if ex.Key != RequestKey(ex.Request) {
			t.Errorf("exchange key %s is not RequestKey of its request", ex.Key)
		}
		if ex.Turn.Served != "scripted" {
			t.Errorf("recorded Served = %q, want the wrapped provider's", ex.Turn.Served)
		}
	}
	if diff := cmp.Diff([]string{"a=a", "c=c"}, got); diff != "" {
		t.Errorf("exchanges mismatch (-want +got):\n%s", diff)
	}
}

func TestRecordCopiesTheRequest(t *testing.T) {
	rec := NewRecord(NewScripted(&protocol.Turn{Text: "ok"}))
	req := conversation()[2].req
	if _, err := rec.Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	key := RequestKey(req)
	req.Messages[0].Content = "changed"
	req.Messages[3].ToolCalls[0].Arguments[2] = 'X'
	ex := rec.Exchanges()[0]
	if got := RequestKey(ex.Request); got != key {
		t.Errorf("the recorded request changed with the caller's")
	}
	ex.Request.Messages[0].Content = "changed too"
	if got := RequestKey(rec.Exchanges()[0].Request); got != key {
		t.Errorf("Exchanges() returned the recorder's own request")
	}
}

func TestReplayRepeatedRequests(t *testing.T) {
	req := simpleRequest()
	c := &Cassette{Format: CassetteFormat, Exchanges: []Exchange{
		{Request: req, Turn: &protocol.Turn{Text: "first"}},
		{Request: conversation()[0].req, Turn: &protocol.Turn{Text: "other"}},
		{Request: req, Turn: &protocol.Turn{Text: "second"}},
		{Request: req, Turn: &protocol.Turn{Text: "third"}},
	}}
	rp, err := NewReplay(c)
	if err != nil {
		t.Fatalf("NewReplay: %v", err)
	}
	var got []string
	for range 5 {
		turn, err := rp.Complete(t.Context(), req)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		got = append(got, turn.Text)
	}
	if diff := cmp.Diff([]string{"first", "second", "third", "third", "third"}, got); diff != "" {
		t.Errorf("answers to a repeated request (-want +got):\n%s", diff)
	}
}

func TestReplayConcurrentRepeats(t *testing.T) {
	const n = 20
	req := simpleRequest()
	c := &Cassette{Format: CassetteFormat}
	for i := range n {
		c.Exchanges = append(c.Exchanges, Exchange{Request: req, Turn: &protocol.Turn{Text: strings.Repeat("x", i+1)}})
	}
	rp, err := NewReplay(c)
	if err != nil {
		t.Fatalf("NewReplay: %v", err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			turn, err := rp.Complete(t.Context(), req)
			if err != nil {
				t.Errorf("Complete: %v", err)
				return
			}
			mu.Lock()
			seen[turn.Text] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d concurrent identical requests got %d distinct answers, want each recorded answer once", n, len(seen))
	}
}

func TestReplayUnrecorded(t *testing.T) {
	rp, err := NewReplay(&Cassette{Format: CassetteFormat, Exchanges: []Exchange{
		{Request: simpleRequest(), Turn: &protocol.Turn{Text: "hi"}},
	}})
	if err != nil {
		t.Fatalf("NewReplay: %v", err)
	}
	req := simpleRequest()
	req.Messages = append(req.Messages, protocol.Message{Role: protocol.RoleTool, ToolCallID: "c", Content: strings.Repeat("ab", 150)})
	_, err = rp.Complete(t.Context(), req)
	if !errors.Is(err, protocol.ErrUnrecorded) {
		t.Fatalf("Complete(unrecorded) = %v, want ErrUnrecorded", err)
	}
	pe := checkCode(t, err, protocol.CodeUnrecorded)
	if pe.Retryable() {
		t.Errorf("an unrecorded request is retryable, want not")
	}
	for _, want := range []string{
		"not recorded",
		RequestKey(req),
		"tool: \"" + strings.Repeat("ab", 100) + "...\"",
	} {
		if !strings.Contains(pe.Message, want) {
			t.Errorf("Message = %q, want it to contain %q", pe.Message, want)
		}
	}
	if strings.Contains(pe.Message, strings.Repeat("ab", 101)) {
		t.Errorf("Message quotes more than 200 characters of the last message")
	}
	if !strings.Contains(pe.Hint, "harness run --record FILE") {
		t.Errorf("Hint = %q, want it to say how to re-record", pe.Hint)
	}

	_, err = rp.Complete(t.Context(), &protocol.CompletionRequest{Model: "m"})
	if pe := checkCode(t, err, protocol.CodeUnrecorded); !strings.Contains(pe.Message, "no messages") {
		t.Errorf("Message = %q, want it to say the request has no messages", pe.Message)
	}
}

func TestCassetteRoundTrip(t *testing.T) {
	rec, _ := recordConversation(t)
	path := filepath.Join(t.TempDir(), "c.json")
	if err := rec.Save(path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	c, err := LoadCassette(path)
	if err != nil {
		t.Fatalf("LoadCassette: %v", err)
	}
	want := &Cassette{Format: CassetteFormat, Exchanges: rec.Exchanges()}
	if diff := cmp.Diff(want, c, cmp.Comparer(jsonEqual)); diff != "" {
		t.Errorf("loaded cassette differs from the saved one (-saved +loaded):\n%s", diff)
	}
	for i, ex := range c.Exchanges {
		if got := RequestKey(ex.Request); got != ex.Key {
			t.Errorf("exchange %d: RequestKey of the loaded request = %s, stored key %s", i, got, ex.Key)
		}
	}
	// Saving what was loaded writes the same bytes.
	first, _ := os.ReadFile(path)
	again := filepath.Join(t.TempDir(), "again.json")
	if err := c.Save(again); err != nil {
		t.Fatalf("Save: %v", err)
	}
	second, _ := os.ReadFile(again)
	if diff := cmp.Diff(string(first), string(second)); diff != "" {
		t.Errorf("save, load, save changed the file (-first +second):\n%s", diff)
	}
}

// TestCassetteGolden pins the file format. Run with -update to rewrite it.
func TestCassetteGolden(t *testing.T) {
	rec, _ := recordConversation(t)
	path := filepath.Join(t.TempDir(), "c.json")
	if err := rec.Save(path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "conversation.cassette.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("saved cassette differs from %s (-want +got):\n%s", golden, diff)
	}
	if !strings.Contains(string(got), "\n  \"exchanges\": [\n") {
		t.Errorf("cassette is not indented with two spaces:\n%s", got)
	}
	if !strings.Contains(string(got), "func TestAdd(t *testing.T)") {
		t.Errorf("cassette escapes HTML characters or lost content:\n%s", got)
	}
	// The golden file replays.
	rp, err := LoadReplay(golden)
	if err != nil {
		t.Fatalf("LoadReplay(%s): %v", golden, err)
	}
	for i, s := range conversation() {
		if _, err := rp.Complete(t.Context(), s.req); err != nil {
			t.Errorf("step %d: Complete: %v", i+1, err)
		}
	}
}

func TestRequestKey(t *testing.T) {
	base := conversation()[2].req
	// The key of a fixed request is pinned: changing it orphans every
	// recorded cassette.
	const pinned = "bddff06b168c7614f450be3dc8910952f357eb96e2760072be24a4bc8499c68d"
	if got := RequestKey(base); got != pinned {
		t.Fatalf("RequestKey = %s, want %s", got, pinned)
	}

	spaced := cloneRequest(base)
	spaced.Messages[3].ToolCalls[0].Arguments = json.RawMessage("{\n  \"path\" :  \"main_test.go\"\n}")
	spaced.Tools[0].Parameters = json.RawMessage("{ \"type\": \"object\",\n \"properties\": {\"path\": {\"type\": \"string\"}}, \"required\": [\"path\"] }")
	if RequestKey(spaced) != RequestKey(base) {
		t.Errorf("RequestKey differs for arguments and schemas that differ only in whitespace")
	}

	for _, tt := range []struct {
		name string
		edit func(*protocol.CompletionRequest)
	}{
		{name: "argument value", edit: func(r *protocol.CompletionRequest) {
			r.Messages[3].ToolCalls[0].Arguments = json.RawMessage(`{"path":"other.go"}`)
		}},
		{name: "content", edit: func(r *protocol.CompletionRequest) { r.Messages[4].Content += " " }},
		{name: "system", edit: func(r *protocol.CompletionRequest) { r.System = "You review code." }},
		{name: "model", edit: func(r *protocol.CompletionRequest) { r.Model = "gpt-other" }},
		{name: "output limit", edit: func(r *protocol.CompletionRequest) { r.MaxOutputTokens = 1 }},
		{name: "one message fewer", edit: func(r *protocol.CompletionRequest) { r.Messages = r.Messages[:4] }},
		{name: "tool description", edit: func(r *protocol.CompletionRequest) { r.Tools[0].Description = "" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := cloneRequest(base)
			tt.edit(r)
			if RequestKey(r) == RequestKey(base) {
				t.Errorf("RequestKey is the same after changing the %s", tt.name)
			}
		})
	}

	t.Run("invalid JSON arguments", func(t *testing.T) {
		r := cloneRequest(base)
		r.Messages[3].ToolCalls[0].Arguments = json.RawMessage(`{"path": `)
		k := RequestKey(r)
		if k == RequestKey(base) || len(k) != 64 {
			t.Errorf("RequestKey with invalid arguments = %q, want a key of its own", k)
		}
	})
}

func TestLoadCassetteErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want protocol.Code
	}{
		{name: "other format", data: `{"format": "harness.cassette/v2", "exchanges": []}`, want: protocol.CodeInvalidField},
		{name: "io-harness recording", data: `{"harness": "0.17.0", "exchanges": []}`, want: protocol.CodeInvalidField},
		{name: "not JSON", data: `exchanges:`, want: protocol.CodeMalformed},
		{name: "not an object", data: `[]`, want: protocol.CodeMalformed},
		{name: "unknown field", data: `{"format": "harness.cassette/v1", "exchanges": [], "extra": 1}`, want: protocol.CodeMalformed},
		{name: "wrong type", data: `{"format": "harness.cassette/v1", "exchanges": {}}`, want: protocol.CodeMalformed},
		{name: "exchange without a turn", data: `{"format": "harness.cassette/v1", "exchanges": [{"key": "k", "request": {"system": "", "messages": []}}]}`, want: protocol.CodeMissingField},
		{name: "exchange without request or key", data: `{"format": "harness.cassette/v1", "exchanges": [{"turn": {"usage": {"input_tokens": 0, "output_tokens": 0}}}]}`, want: protocol.CodeMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.json")
			if err := os.WriteFile(path, []byte(tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadReplay(path)
			checkCode(t, err, tt.want)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("LoadReplay error %q does not name the file", err)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadReplay(filepath.Join(t.TempDir(), "none.json"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("LoadReplay(missing) = %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("NewReplay checks the format", func(t *testing.T) {
		_, err := NewReplay(&Cassette{Format: "harness.cassette/v0"})
		checkCode(t, err, protocol.CodeInvalidField)
	})
}

// TestRecordSaveMidRun saves while calls are in flight: every save is a
// whole cassette holding at least the exchanges kept before it, and no
// temporary file is left behind.
func TestRecordSaveMidRun(t *testing.T) {
	const calls = 40
	rec := NewRecord(NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		return &protocol.Turn{Text: req.Messages[0].Content}, nil
	}))
	dir := t.TempDir()
	path := filepath.Join(dir, "run.cassette.json")
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			req := simpleRequest()
			req.Messages[0].Content = strings.Repeat("m", i+1)
			if _, err := rec.Complete(t.Context(), req); err != nil {
				t.Errorf("Complete: %v", err)
			}
		})
	}
	for range 10 {
		before := len(rec.Exchanges())
		if err := rec.Save(path); err != nil {
			t.Fatalf("Save: %v", err)
		}
		c, err := LoadCassette(path)
		if err != nil {
			t.Fatalf("LoadCassette after a save mid-run: %v", err)
		}
		if len(c.Exchanges) < before {
			t.Errorf("saved %d exchanges, want at least the %d kept before the save", len(c.Exchanges), before)
		}
	}
	wg.Wait()
	if err := rec.Save(path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	c, err := LoadCassette(path)
	if err != nil {
		t.Fatalf("LoadCassette: %v", err)
	}
	if len(c.Exchanges) != calls {
		t.Errorf("final cassette has %d exchanges, want %d", len(c.Exchanges), calls)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only the cassette", names)
	}
}

func TestSaveFailureLeavesFileAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory that does not exist cannot hold the temporary file.
	err := (&Cassette{}).Save(filepath.Join(dir, "missing", "c.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Save into a missing directory = %v, want fs.ErrNotExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "previous" {
		t.Errorf("file changed to %q", got)
	}
}

// TestReplayCompactsArguments checks a replayed turn carries its tool
// arguments as they are after any JSON encoding, however the cassette
// spaces them.
func TestReplayCompactsArguments(t *testing.T) {
	rec := NewRecord(NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{
		{ID: "c", Name: "exec", Arguments: json.RawMessage(`{"argv": ["go",  "test"]}`)},
		{ID: "d", Name: "exec", Arguments: json.RawMessage(`not json`)},
	}}))
	got, err := rec.Complete(t.Context(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(got.ToolCalls[0].Arguments) != `{"argv": ["go",  "test"]}` {
		t.Errorf("Record changed the turn it returns: %s", got.ToolCalls[0].Arguments)
	}
	path := filepath.Join(t.TempDir(), "c.json")
	if err := rec.Save(path); err != nil {
		t.Fatalf("Save: %v", err)
	}
	rp, err := LoadReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	turn, err := rp.Complete(t.Context(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(turn.ToolCalls[0].Arguments), `{"argv":["go","test"]}`; got != want {
		t.Errorf("replayed arguments = %s, want %s", got, want)
	}
	if got, want := string(turn.ToolCalls[1].Arguments), `"not json"`; got != want {
		t.Errorf("replayed invalid arguments = %s, want %s", got, want)
	}
}

// TestRecordAndReplayStream checks Record passes a stream through and
// keeps the exchange, and Replay hands on the recorded text in one piece.
func TestRecordAndReplayStream(t *testing.T) {
	f := streamServer(t,
		chunk(`{"content": "Hel"}`, `null`), chunk(`{"content": "lo."}`, `"stop"`), usageChunk, "data: [DONE]")
	rec := NewRecord(f.newClient(t, nil))
	var tokens []string
	turn, err := rec.CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
	if err != nil {
		t.Fatalf("Record.CompleteStream: %v", err)
	}
	if diff := cmp.Diff([]string{"Hel", "lo."}, tokens); diff != "" {
		t.Errorf("recorded stream's tokens (-want +got):\n%s", diff)
	}
	exchanges := rec.Exchanges()
	if len(exchanges) != 1 {
		t.Fatalf("Record kept %d exchanges, want 1", len(exchanges))
	}
	rp, err := NewReplay(&Cassette{Format: CassetteFormat, Exchanges: exchanges})
	if err != nil {
		t.Fatal(err)
	}
	tokens = nil
	replayed, err := rp.CompleteStream(t.Context(), simpleRequest(), func(s string) { tokens = append(tokens, s) })
	if err != nil {
		t.Fatalf("Replay.CompleteStream: %v", err)
	}
	if diff := cmp.Diff(turn, replayed, cmpopts.IgnoreFields(protocol.Turn{}, "Served")); diff != "" {
		t.Errorf("replayed turn differs from the recorded one (-recorded +replayed):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Hello."}, tokens); diff != "" {
		t.Errorf("replayed tokens (-want +got):\n%s", diff)
	}
	other := simpleRequest()
	other.Messages[0].Content = "Bye"
	tokens = nil
	_, err = rp.CompleteStream(t.Context(), other, func(s string) { tokens = append(tokens, s) })
	checkCode(t, err, protocol.CodeUnrecorded)
	if len(tokens) != 0 {
		t.Errorf("an unrecorded request streamed %q, want nothing", tokens)
	}
}

// TestStreamNonStreamer checks Stream hands a provider's whole text on at
// once when it cannot stream, and nothing when there is none.
func TestStreamNonStreamer(t *testing.T) {
	p := NewScripted(&protocol.Turn{Text: "All at once."}, &protocol.Turn{})
	for _, want := range [][]string{{"All at once."}, nil} {
		var tokens []string
		if _, err := Stream(t.Context(), p, simpleRequest(), func(s string) { tokens = append(tokens, s) }); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		if diff := cmp.Diff(want, tokens); diff != "" {
			t.Errorf("tokens (-want +got):\n%s", diff)
		}
	}
	if _, err := Stream(t.Context(), p, simpleRequest(), nil); err == nil {
		t.Errorf("Stream past the script succeeded, want an error")
	}
}
