package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ioharness/harness/pkg/protocol"
)

// CassetteFormat is the format string of the cassettes this build reads and
// writes.
const CassetteFormat = "harness.cassette/v1"

// ReplayName is the Name of a Replay provider, and the Served of its turns.
const ReplayName = "replay"

// maxShownContent bounds how much of the last message an unrecorded
// request's error quotes, in characters.
const maxShownContent = 200

// Cassette is a recording of provider calls, stored as indented JSON so it
// diffs well:
//
//	{"format": "harness.cassette/v1", "exchanges": [{"key": "...", "request": {...}, "turn": {...}}]}
type Cassette struct {
	// Format is CassetteFormat.
	Format string `json:"format"`
	// Exchanges are the successful calls in the order they were made.
	Exchanges []Exchange `json:"exchanges"`
}

// Exchange is one recorded call: the request, its key, and the turn that
// answered it.
type Exchange struct {
	// Key is RequestKey(Request). It is written for people reading the
	// file; a Replay derives the key from Request again, so a hand-edited
	// request still matches.
	Key string `json:"key"`
	// Request is the request as recorded, with tool arguments and
	// parameters compacted.
	Request *protocol.CompletionRequest `json:"request"`
	// Turn is the answer, with Served naming the provider that gave it.
	Turn *protocol.Turn `json:"turn"`
}

// RequestKey identifies a request by its content: the lowercase hex SHA-256
// of the request's JSON (encoding/json, default settings) after every tool
// call's Arguments and every tool's Parameters are compacted, so
// whitespace in stored JSON does not change the key. Arguments or
// Parameters that are not valid JSON are keyed as a JSON string of their
// text. Every field of the request counts, the model included.
func RequestKey(req *protocol.CompletionRequest) string {
	b, err := json.Marshal(canonicalRequest(req))
	if err != nil {
		// canonicalRequest leaves only valid JSON in raw fields, so this
		// cannot happen; key the error text rather than panic.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonicalRequest returns a deep copy of req with every raw JSON field
// compacted, or turned into a JSON string when it is not valid JSON.
func canonicalRequest(req *protocol.CompletionRequest) *protocol.CompletionRequest {
	c := cloneRequest(req)
	if c == nil {
		return nil
	}
	for i := range c.Messages {
		for j := range c.Messages[i].ToolCalls {
			c.Messages[i].ToolCalls[j].Arguments = canonicalJSON(c.Messages[i].ToolCalls[j].Arguments)
		}
	}
	for i := range c.Tools {
		c.Tools[i].Parameters = canonicalJSON(c.Tools[i].Parameters)
	}
	return c
}

// canonicalTurn returns a deep copy of t with its tool arguments made
// canonical, as they are after any JSON encoding.
func canonicalTurn(t *protocol.Turn) *protocol.Turn {
	c := cloneTurn(t)
	if c == nil {
		return nil
	}
	for i := range c.ToolCalls {
		c.ToolCalls[i].Arguments = canonicalJSON(c.ToolCalls[i].Arguments)
	}
	return c
}

// canonicalJSON compacts raw, or returns the JSON string of its text when
// raw is not valid JSON. Empty raw stays empty.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	if !json.Valid(raw) {
		b, _ := json.Marshal(string(raw)) // a string always marshals
		return b
	}
	return compactJSON(raw)
}

// LoadCassette reads the cassette at path. A file that cannot be read is
// returned as the *fs.PathError wrapped; a file that is not a cassette is
// a *protocol.Error (wrapped with the path): CodeMalformed when it is not
// JSON of the cassette's shape (unknown fields included), CodeInvalidField
// when its format is not CassetteFormat.
func LoadCassette(path string) (*Cassette, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load cassette: %w", err)
	}
	c, perr := decodeCassette(data)
	if perr != nil {
		return nil, fmt.Errorf("load cassette %s: %w", path, perr)
	}
	return c, nil
}

func decodeCassette(data []byte) (*Cassette, *protocol.Error) {
	var head struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, protocol.FieldError(protocol.CodeMalformed, "",
			"re-record the cassette with `harness run --record FILE`",
			"the cassette is not a JSON object: %s", err.Error())
	}
	if perr := checkFormat(head.Format); perr != nil {
		return nil, perr
	}
	var c Cassette
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, protocol.FieldError(protocol.CodeMalformed, "",
			"fix the cassette by hand or re-record it with `harness run --record FILE`",
			"the cassette does not have the %s shape: %s", CassetteFormat, err.Error())
	}
	return &c, nil
}

func checkFormat(format string) *protocol.Error {
	if format == CassetteFormat {
		return nil
	}
	return protocol.FieldError(protocol.CodeInvalidField, "format",
		"this build reads "+CassetteFormat+"; re-record the cassette with `harness run --record FILE`",
		"the cassette's format is %q, not %q", format, CassetteFormat)
}

// Save writes the cassette to path as indented JSON (two spaces), through a
// temporary file in the same directory renamed over path, so a reader never
// sees a partial cassette. An empty Format is written as CassetteFormat.
// Errors are the encoding or file system error, wrapped with the path; on
// error path is left as it was.
func (c *Cassette) Save(path string) error {
	out := Cassette{Format: c.Format, Exchanges: c.Exchanges}
	if out.Format == "" {
		out.Format = CassetteFormat
	}
	if out.Exchanges == nil {
		out.Exchanges = []Exchange{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("save cassette %s: %w", path, err)
	}
	if err := writeFileAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("save cassette %s: %w", path, err)
	}
	return nil
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Record is a Provider that forwards every call to another provider and
// keeps each successful exchange, in order, to be saved as a cassette. It
// is safe for concurrent use; exchanges are kept in the order their calls
// returned.
type Record struct {
	p Provider

	// saveMu orders saves, so a later save never loses to an earlier one.
	// Lock order: saveMu before mu.
	saveMu sync.Mutex
	// mu guards exchanges.
	mu        sync.Mutex
	exchanges []Exchange
}

var (
	_ Provider = (*Record)(nil)
	_ Streamer = (*Record)(nil)
)

// NewRecord returns a recorder forwarding to p.
func NewRecord(p Provider) *Record {
	return &Record{p: p}
}

// Name returns the wrapped provider's name.
func (r *Record) Name() string { return r.p.Name() }

// Complete forwards the call and returns what the wrapped provider
// returned. A successful exchange is kept, with its request and turn
// copied and their raw JSON made canonical; a failure is not kept. An
// error from the wrapped provider is returned as is when it is a
// *protocol.Error and classified as a call that got no answer otherwise; a
// nil turn with a nil error is CodeProviderMalformed.
func (r *Record) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	turn, err := r.p.Complete(ctx, req)
	return r.keep(req, turn, err)
}

// CompleteStream forwards the call through Stream, so a wrapped Streamer
// streams to onToken and another provider hands it its whole text at
// once, and keeps a successful exchange as Complete does. It returns and
// fails as Complete does.
func (r *Record) CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error) {
	turn, err := Stream(ctx, r.p, req, onToken)
	return r.keep(req, turn, err)
}

// keep records the exchange of a call that returned turn and err.
func (r *Record) keep(req *protocol.CompletionRequest, turn *protocol.Turn, err error) (*protocol.Turn, error) {
	if err != nil {
		return nil, providerError(r.p.Name(), err)
	}
	if turn == nil {
		return nil, protocol.FieldError(protocol.CodeProviderMalformed, "",
			"fix the wrapped provider: it must return a turn or an error",
			"%s returned no turn and no error", r.p.Name())
	}
	ex := Exchange{Key: RequestKey(req), Request: canonicalRequest(req), Turn: canonicalTurn(turn)}
	r.mu.Lock()
	r.exchanges = append(r.exchanges, ex)
	r.mu.Unlock()
	return turn, nil
}

// Exchanges returns a copy of the exchanges kept so far, in order.
func (r *Record) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Exchange, len(r.exchanges))
	for i, ex := range r.exchanges {
		out[i] = Exchange{Key: ex.Key, Request: cloneRequest(ex.Request), Turn: cloneTurn(ex.Turn)}
	}
	return out
}

// Save writes the exchanges kept so far to path as a cassette, atomically
// (see Cassette.Save, whose errors it returns). It may be called at any
// time, also while calls are in flight; each save holds every exchange
// kept before it began.
func (r *Record) Save(path string) error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	// Exchanges are never modified once kept, so the slice is enough.
	c := Cassette{Format: CassetteFormat, Exchanges: r.exchanges[:len(r.exchanges):len(r.exchanges)]}
	r.mu.Unlock()
	return c.Save(path)
}

// Replay is a Provider that answers from a cassette by request content.
// Identical requests are answered with their recorded turns in recorded
// order; once those run out the last one repeats. It is safe for
// concurrent use.
//
// Replay keeps, per request key, how many times it has answered, and only
// in memory: within one process the N-th identical request gets the N-th
// recorded answer. After a crash, a resumed run that re-sends a request it
// sent before the crash gets that request's first answer again. Requests
// carry the whole transcript, so two steps of one run rarely share a key;
// a run that repeats an identical request across a restart may get an
// earlier answer than it got the first time.
type Replay struct {
	mu      sync.Mutex
	answers map[string][]*protocol.Turn
	served  map[string]int
}

var (
	_ Provider = (*Replay)(nil)
	_ Streamer = (*Replay)(nil)
)

// LoadReplay returns a Replay answering from the cassette at path. It
// returns LoadCassette's errors and NewReplay's.
func LoadReplay(path string) (*Replay, error) {
	c, err := LoadCassette(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReplay(c)
	if err != nil {
		return nil, fmt.Errorf("load cassette %s: %w", path, err)
	}
	return r, nil
}

// NewReplay returns a Replay answering from c. Each exchange is keyed by
// RequestKey of its Request, or by its Key when it has no request. It
// returns a *protocol.Error: CodeInvalidField when c's format is not
// CassetteFormat, CodeMissingField when c is nil or an exchange has no
// turn, or neither a request nor a key.
func NewReplay(c *Cassette) (*Replay, error) {
	if c == nil {
		return nil, protocol.FieldError(protocol.CodeMissingField, "", "pass the cassette to replay", "no cassette")
	}
	if perr := checkFormat(c.Format); perr != nil {
		return nil, perr
	}
	r := &Replay{answers: make(map[string][]*protocol.Turn), served: make(map[string]int)}
	for i, ex := range c.Exchanges {
		if ex.Turn == nil {
			return nil, protocol.FieldError(protocol.CodeMissingField, fmt.Sprintf("exchanges[%d].turn", i),
				"every exchange needs the turn that answered it", "exchange %d has no turn", i)
		}
		key := ex.Key
		if ex.Request != nil {
			key = RequestKey(ex.Request)
		}
		if key == "" {
			return nil, protocol.FieldError(protocol.CodeMissingField, fmt.Sprintf("exchanges[%d].request", i),
				"every exchange needs the request it answered", "exchange %d has no request", i)
		}
		r.answers[key] = append(r.answers[key], canonicalTurn(ex.Turn))
	}
	return r, nil
}

// Name returns "replay".
func (r *Replay) Name() string { return ReplayName }

// Complete returns a copy of the recorded turn for req's content, with
// Served set to "replay" and tool arguments compacted. A done ctx returns
// CodeProviderTimeout or CodeProviderTransport and counts no answer. A
// request the cassette does not hold returns CodeUnrecorded (not
// retryable), naming the request's key and quoting its last message.
func (r *Replay) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	if err := ctxError(ctx, ReplayName); err != nil {
		return nil, err
	}
	key := RequestKey(req)
	r.mu.Lock()
	answers := r.answers[key]
	i := r.served[key]
	if i < len(answers)-1 {
		r.served[key] = i + 1
	} else {
		i = len(answers) - 1
	}
	r.mu.Unlock()
	if len(answers) == 0 {
		return nil, unrecorded(key, req)
	}
	t := cloneTurn(answers[i])
	t.Served = ReplayName
	return t, nil
}

// CompleteStream answers as Complete does, and hands onToken the recorded
// text as one piece, when there is any. It fails as Complete does, before
// calling onToken.
func (r *Replay) CompleteStream(ctx context.Context, req *protocol.CompletionRequest, onToken func(text string)) (*protocol.Turn, error) {
	t, err := r.Complete(ctx, req)
	if err == nil && onToken != nil && t.Text != "" {
		onToken(t.Text)
	}
	return t, err
}

// unrecorded is the error for a request the cassette does not hold.
func unrecorded(key string, req *protocol.CompletionRequest) *protocol.Error {
	last := "the request has no messages"
	if req != nil && len(req.Messages) > 0 {
		m := req.Messages[len(req.Messages)-1]
		last = fmt.Sprintf("its last message is %s: %q", m.Role, truncate(m.Content, maxShownContent))
	}
	return protocol.FieldError(protocol.CodeUnrecorded, "",
		"re-record the cassette with `harness run --record FILE`, or find what made the request differ from the recording (prompt, tools, model, workspace)",
		"the request was not recorded in the cassette (key %s); %s", key, last)
}

// AcceptsImages reports that a replay answers requests with images as it
// answers any other: by their content.
func (r *Replay) AcceptsImages() bool { return true }

// AcceptsImages reports whether the recorded provider takes images.
func (r *Record) AcceptsImages() bool {
	a, ok := r.p.(interface{ AcceptsImages() bool })
	return ok && a.AcceptsImages()
}
