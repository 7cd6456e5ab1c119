// Package providertest is the conformance suite every HTTP provider client
// passes: Run points a client at an httptest server that speaks the
// vendor's wire format, described by a Wire, and checks what the client
// sends and how it reads every answer and every failure.
//
// A client's test calls Run once per client, building the client on the
// server it is handed:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, func(t *testing.T, srv *httptest.Server) provider.Provider {
//			p, err := provider.NewAnthropic(provider.AnthropicConfig{
//				APIKey: providertest.APIKey, BaseURL: srv.URL,
//				HTTPClient: srv.Client(), Timeout: providertest.Timeout,
//			})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return p
//		}, providertest.AnthropicWire{})
//	}
//
// The client must send APIKey, use Timeout as its whole-call timeout, leave
// the request's model alone (no configured Model), and implement
// provider.Streamer. The suite checks plain and streamed answers with
// text and tool calls (streamed tool-call arguments arrive in fragments),
// the usage blocks, that a streamed answer gives the same turn as the
// plain one, the transcript the server decodes, and every failure: 429
// with Retry-After in seconds and as an HTTP date, 401, 403, 400, a
// context overflow, 500, 503, 529 (overloaded), a redirect, a socket that
// hangs before or during the answer, a connection closed, a stream cut
// mid-event or ended early, an error event mid-stream, and malformed
// JSON.
package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// APIKey is the key the suite's servers expect the client to send.
const APIKey = "sk-providertest-key"

// Timeout is the whole-call timeout a client under test must be given. The
// cases where the server hangs wait this long; every other case's server
// answers at once.
const Timeout = 500 * time.Millisecond

// Wire is a vendor's wire format as the suite's server speaks it. Turns
// handed to a Wire use OpenAI's finish reasons ("stop", "tool_calls",
// "length"); a Wire writes them in its vendor's words.
type Wire interface {
	// Name names the format in messages ("openai", "anthropic").
	Name() string
	// Path is the path the client must POST completions to, such as
	// "/v1/chat/completions".
	Path() string
	// Decode checks a request's headers (the key must be APIKey) and
	// decodes its body strictly into the transcript it carries, and
	// whether it asks for a stream. It returns an error saying what is
	// wrong with a request the vendor would refuse.
	Decode(header http.Header, body []byte) (req *protocol.CompletionRequest, stream bool, err error)
	// Answer is the body of a successful, non-streamed answer with turn.
	Answer(turn *protocol.Turn) []byte
	// Events are the server-sent events of a streamed answer with turn, in
	// order, each ending with its blank line, the last one the stream's
	// end marker. Text and tool-call arguments are split into fragments
	// of a few characters.
	Events(turn *protocol.Turn) [][]byte
	// ErrorBody is the body of an HTTP error answer with status and
	// message, as the vendor writes one.
	ErrorBody(status int, message string) []byte
	// ErrorEvent is a server-sent event reporting, mid-stream, the failure
	// an HTTP answer with status would.
	ErrorEvent(status int, message string) []byte
	// Expect is turn as a client should report it after the wire carried
	// it: fields the format cannot carry zeroed, finish reasons in the
	// vendor's words, Served empty.
	Expect(turn *protocol.Turn) *protocol.Turn
}

// NewProvider builds the client under test, pointed at server.
type NewProvider func(t *testing.T, server *httptest.Server) provider.Provider

// Run runs the conformance suite against the client newProvider builds,
// with servers speaking wire. Each case builds its own server and client.
func Run(t *testing.T, newProvider NewProvider, wire Wire) {
	t.Helper()
	t.Run("Answers", func(t *testing.T) { runAnswers(t, newProvider, wire) })
	t.Run("Failures", func(t *testing.T) { runFailures(t, newProvider, wire) })
	t.Run("Calls", func(t *testing.T) { runCalls(t, newProvider, wire) })
}

// answerTurns are the answers every client must read, plain and streamed.
func answerTurns() map[string]*protocol.Turn {
	return map[string]*protocol.Turn{
		"Text": {
			Text:         "The test expects 3 but Add returns 4. Fixing it: é, 日本語, 🙂.",
			Model:        "model-test-2026",
			FinishReason: "stop",
			Usage:        protocol.Usage{InputTokens: 1200, OutputTokens: 48},
		},
		"TextAndToolCalls": {
			Text: "Running the tests, then reading the code.",
			ToolCalls: []protocol.ToolCall{
				{ID: "call_a1", Name: "exec", Arguments: json.RawMessage(`{"argv":["go","test","./..."],"dir":"pkg/add"}`)},
				{ID: "call_b2", Name: "read_file", Arguments: json.RawMessage(`{"path":"add.go"}`)},
			},
			Model:        "model-test-2026",
			FinishReason: "tool_calls",
			Usage:        protocol.Usage{InputTokens: 1500, OutputTokens: 60, CachedTokens: 1024},
		},
		"ToolCallOnly": {
			ToolCalls: []protocol.ToolCall{
				{ID: "call_c3", Name: "write_file", Arguments: json.RawMessage(`{"path":"a b/ü.go","lines":[1,2,3],"opts":{"mode":null,"quote":"say \"hi\""}}`)},
			},
			Model:        "model-test-2026",
			FinishReason: "tool_calls",
			Usage:        protocol.Usage{InputTokens: 900, OutputTokens: 31},
		},
		"Usage": {
			Text:         "Cut short",
			Model:        "model-test-2026",
			FinishReason: "length",
			Usage:        protocol.Usage{InputTokens: 5000, OutputTokens: 700, CachedTokens: 4096, ReasoningTokens: 512},
		},
	}
}

// Transcript is the request the suite sends: a system prompt, two tools,
// an assistant turn with text and two tool calls, their results matched by
// id, a user message right after the results, and a second round of a
// tool call and its result.
func Transcript() *protocol.CompletionRequest {
	return &protocol.CompletionRequest{
		Model:           "model-test",
		System:          "You fix code. Be brief.",
		MaxOutputTokens: 1024,
		Tools: []protocol.ToolSpec{
			{Name: "read_file", Description: "Read a file of the workspace.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "exec", Description: "Run a command.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"}}},"required":["argv"]}`)},
		},
		Messages: []protocol.Message{
			{Role: protocol.RoleUser, Content: "Make the tests pass."},
			{Role: protocol.RoleAssistant, Content: "Reading both files.", ToolCalls: []protocol.ToolCall{
				{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"add.go"}`)},
				{ID: "call_2", Name: "read_file", Arguments: json.RawMessage(`{"path":"add_test.go"}`)},
			}},
			{Role: protocol.RoleTool, ToolCallID: "call_1", Content: "package add\n\nfunc Add(a, b int) int { return a + b + 1 }"},
			{Role: protocol.RoleTool, ToolCallID: "call_2", Content: "func TestAdd(t *testing.T) { if Add(1, 2) != 3 { t.Fail() } }"},
			{Role: protocol.RoleUser, Content: "Keep going."},
			{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{
				{ID: "call_3", Name: "exec", Arguments: json.RawMessage(`{"argv":["go","test"]}`)},
			}},
			{Role: protocol.RoleTool, ToolCallID: "call_3", Content: "--- FAIL: TestAdd"},
		},
	}
}

// received is one request a suite server decoded.
type received struct {
	req    *protocol.CompletionRequest
	stream bool
}

// answerFunc answers one request; stream says whether it asked for one.
type answerFunc func(w http.ResponseWriter, r *http.Request, stream bool)

// server is an httptest server speaking a Wire, answering with answer.
type server struct {
	t      *testing.T
	wire   Wire
	answer answerFunc
	srv    *httptest.Server

	mu  sync.Mutex
	got []received
}

func newServer(t *testing.T, wire Wire, answer answerFunc) *server {
	t.Helper()
	s := &server{t: t, wire: wire, answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	refuse := func(format string, args ...any) {
		s.t.Errorf("%s server: "+format, append([]any{s.wire.Name()}, args...)...)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(s.wire.ErrorBody(http.StatusBadRequest, "providertest refused the request; see the test log"))
	}
	if r.Method != http.MethodPost || r.URL.Path != s.wire.Path() {
		refuse("got %s %s, want POST %s", r.Method, r.URL.Path, s.wire.Path())
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		refuse("read body: %v", err)
		return
	}
	req, stream, err := s.wire.Decode(r.Header, body)
	if err != nil {
		refuse("%v\nbody: %s", err, body)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, received{req: req, stream: stream})
	s.mu.Unlock()
	s.answer(w, r, stream)
}

// received returns the requests decoded so far.
func (s *server) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

// answerWith answers a plain request with wire's Answer and a streamed one
// with its Events, flushing each.
func answerWith(wire Wire, turn *protocol.Turn) answerFunc {
	return func(w http.ResponseWriter, r *http.Request, stream bool) {
		if !stream {
			writeBody(w, http.StatusOK, nil, wire.Answer(turn))
			return
		}
		writeEvents(w, wire.Events(turn))
	}
}

func writeBody(w http.ResponseWriter, status int, header map[string]string, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	w.Write(body)
}

// startEvents writes the headers of a stream.
func startEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// writeEvents writes a whole stream, flushing after each event.
func writeEvents(w http.ResponseWriter, events [][]byte) {
	startEvents(w)
	sendEvents(w, events)
}

func sendEvents(w http.ResponseWriter, events [][]byte) {
	f := w.(http.Flusher)
	for _, e := range events {
		w.Write(e)
		f.Flush()
	}
}

// call makes one call, plain or streamed, and returns the pieces of text
// streamed to onToken. It fails the test when p does not stream.
func call(t *testing.T, ctx context.Context, p provider.Provider, req *protocol.CompletionRequest, stream bool) (*protocol.Turn, []string, error) {
	t.Helper()
	if !stream {
		turn, err := p.Complete(ctx, req)
		return turn, nil, err
	}
	s, ok := p.(provider.Streamer)
	if !ok {
		t.Fatalf("%T does not implement provider.Streamer", p)
	}
	var tokens []string
	turn, err := s.CompleteStream(ctx, req, func(text string) { tokens = append(tokens, text) })
	return turn, tokens, err
}

// modeName names a call's mode in test names.
func modeName(stream bool) string {
	if stream {
		return "Streamed"
	}
	return "Plain"
}

// jsonEqual compares raw JSON by value; raw that is not JSON by bytes.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return cmp.Equal(x, y)
}

func runAnswers(t *testing.T, newProvider NewProvider, wire Wire) {
	for name, turn := range answerTurns() {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, wire, answerWith(wire, turn))
			p := newProvider(t, srv.srv)
			want := wire.Expect(turn)
			want.Served = p.Name()

			var got [2]*protocol.Turn
			for i, stream := range []bool{false, true} {
				turn, tokens, err := call(t, t.Context(), p, Transcript(), stream)
				if err != nil {
					t.Fatalf("%s call: %v", modeName(stream), err)
				}
				got[i] = turn
				if diff := cmp.Diff(want, turn); diff != "" {
					t.Errorf("%s call: turn mismatch (-want +got):\n%s", modeName(stream), diff)
				}
				if !stream {
					continue
				}
				if joined := strings.Join(tokens, ""); joined != turn.Text {
					t.Errorf("streamed pieces join to %q, want the turn's text %q", joined, turn.Text)
				}
				if len([]rune(turn.Text)) > 8 && len(tokens) < 2 {
					t.Errorf("text of %d characters came in %d pieces, want it streamed in several", len([]rune(turn.Text)), len(tokens))
				}
			}
			if diff := cmp.Diff(got[0], got[1]); diff != "" {
				t.Errorf("streamed turn differs from the plain one (-plain +streamed):\n%s", diff)
			}

			reqs := srv.received()
			if len(reqs) != 2 {
				t.Fatalf("server got %d requests, want 2", len(reqs))
			}
			for i, r := range reqs {
				if r.stream != (i == 1) {
					t.Errorf("request %d: stream = %v, want %v", i+1, r.stream, i == 1)
				}
				if diff := cmp.Diff(Transcript(), r.req, cmp.Comparer(jsonEqual)); diff != "" {
					t.Errorf("request %d (%s): the server decoded another transcript than was sent (-sent +decoded):\n%s",
						i+1, modeName(r.stream), diff)
				}
			}
		})
	}
}

// failure is one way a call fails, and what the client must make of it.
type failure struct {
	name   string
	plain  bool // run with Complete
	stream bool // run with CompleteStream
	hangs  bool // the server waits for the client to give up
	answer func(wire Wire) answerFunc
	want   protocol.Code
	// retryAfter is the inclusive range RetryAfterMS must fall in; zero
	// for none.
	retryAfter [2]int64
}

// partial is the turn the streams of the failure cases begin to send.
var partial = &protocol.Turn{
	Text:         "This answer never completes, as the stream fails.",
	ToolCalls:    []protocol.ToolCall{{ID: "call_x", Name: "exec", Arguments: json.RawMessage(`{"argv":["make","test"]}`)}},
	Model:        "model-test-2026",
	FinishReason: "tool_calls",
	Usage:        protocol.Usage{InputTokens: 10, OutputTokens: 20},
}

func status(code int, header map[string]string, message string) func(Wire) answerFunc {
	return func(wire Wire) answerFunc {
		return func(w http.ResponseWriter, r *http.Request, stream bool) {
			writeBody(w, code, header, wire.ErrorBody(code, message))
		}
	}
}

func raw(code int, contentType, body string) func(Wire) answerFunc {
	return func(wire Wire) answerFunc {
		return func(w http.ResponseWriter, r *http.Request, stream bool) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(code)
			io.WriteString(w, body)
		}
	}
}

// streamThen sends the first half of partial's events, then does rest.
func streamThen(rest func(w http.ResponseWriter, r *http.Request, wire Wire, next []byte)) func(Wire) answerFunc {
	return func(wire Wire) answerFunc {
		return func(w http.ResponseWriter, r *http.Request, stream bool) {
			events := wire.Events(partial)
			half := len(events) / 2
			startEvents(w)
			sendEvents(w, events[:half])
			rest(w, r, wire, events[half])
		}
	}
}

func failures() []failure {
	retryAt := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	return []failure{
		{name: "429RetryAfterSeconds", plain: true, stream: true,
			answer: status(429, map[string]string{"Retry-After": "7"}, "Rate limit reached; slow down"),
			want:   protocol.CodeRateLimited, retryAfter: [2]int64{7000, 7000}},
		{name: "429RetryAfterDate", plain: true, stream: true,
			answer: status(429, map[string]string{"Retry-After": retryAt}, "Rate limit reached; slow down"),
			want:   protocol.CodeRateLimited, retryAfter: [2]int64{20000, 31000}},
		{name: "429", plain: true, stream: true,
			answer: status(429, nil, "Rate limit reached"), want: protocol.CodeRateLimited},
		{name: "401", plain: true, stream: true,
			answer: status(401, nil, "invalid x-api-key"), want: protocol.CodeProviderAuth},
		{name: "403", plain: true, stream: true,
			answer: status(403, nil, "your key may not use this model"), want: protocol.CodeProviderAuth},
		{name: "400", plain: true, stream: true,
			answer: status(400, nil, "messages.1.content: field required"), want: protocol.CodeProviderRequest},
		{name: "400ContextOverflow", plain: true, stream: true,
			answer: status(400, nil, "prompt is too long: 212345 tokens > 200000 maximum"), want: protocol.CodeContextOverflow},
		{name: "404", plain: true, stream: true,
			answer: status(404, nil, "model: model-test"), want: protocol.CodeProviderRequest},
		{name: "500", plain: true, stream: true,
			answer: raw(500, "text/html", "<html><body>Internal Server Error</body></html>"), want: protocol.CodeProviderServer},
		{name: "503RetryAfter", plain: true, stream: true,
			answer: status(503, map[string]string{"Retry-After": "3"}, "The service is temporarily unavailable"),
			want:   protocol.CodeProviderServer, retryAfter: [2]int64{3000, 3000}},
		{name: "529Overloaded", plain: true, stream: true,
			answer: status(529, nil, "Overloaded"), want: protocol.CodeProviderServer},
		{name: "Redirect", plain: true, stream: true,
			answer: func(Wire) answerFunc {
				return func(w http.ResponseWriter, r *http.Request, stream bool) {
					http.Redirect(w, r, "https://elsewhere.test/v1", http.StatusTemporaryRedirect)
				}
			},
			want: protocol.CodeProviderRequest},
		{name: "MalformedJSON", plain: true,
			answer: func(wire Wire) answerFunc {
				return func(w http.ResponseWriter, r *http.Request, stream bool) {
					b := wire.Answer(partial)
					writeBody(w, 200, nil, b[:len(b)/2])
				}
			},
			want: protocol.CodeProviderMalformed},
		{name: "NotJSON", plain: true,
			answer: raw(200, "text/html", "<html>a gateway's login page</html>"), want: protocol.CodeProviderMalformed},
		{name: "JSONButNoAnswer", plain: true,
			answer: raw(200, "application/json", `{"status": "ok"}`), want: protocol.CodeProviderMalformed},
		{name: "EmptyBody", plain: true,
			answer: raw(200, "application/json", ""), want: protocol.CodeProviderMalformed},
		{name: "EventNotJSON", stream: true,
			answer: streamThen(func(w http.ResponseWriter, r *http.Request, wire Wire, next []byte) {
				sendEvents(w, [][]byte{[]byte("data: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"ty\n\n")})
			}),
			want: protocol.CodeProviderMalformed},
		{name: "ErrorEventMidStream", stream: true,
			answer: streamThen(func(w http.ResponseWriter, r *http.Request, wire Wire, next []byte) {
				sendEvents(w, [][]byte{wire.ErrorEvent(529, "Overloaded")})
			}),
			want: protocol.CodeProviderServer},
		{name: "StreamCutMidEvent", stream: true,
			answer: streamThen(func(w http.ResponseWriter, r *http.Request, wire Wire, next []byte) {
				sendEvents(w, [][]byte{next[:len(next)/2]})
				panic(http.ErrAbortHandler) // the connection drops
			}),
			want: protocol.CodeProviderTransport},
		{name: "StreamEndsMidEvent", stream: true,
			answer: streamThen(func(w http.ResponseWriter, r *http.Request, wire Wire, next []byte) {
				sendEvents(w, [][]byte{next[:len(next)/2]}) // and the body ends cleanly
			}),
			want: protocol.CodeProviderTransport},
		{name: "StreamEndsBetweenEvents", stream: true,
			answer: streamThen(func(w http.ResponseWriter, r *http.Request, wire Wire, next []byte) {}),
			want:   protocol.CodeProviderTransport},
		{name: "ConnectionClosed", plain: true, stream: true,
			answer: func(Wire) answerFunc {
				return func(w http.ResponseWriter, r *http.Request, stream bool) { panic(http.ErrAbortHandler) }
			},
			want: protocol.CodeProviderTransport},
		{name: "BodyCutMidway", plain: true,
			answer: func(wire Wire) answerFunc {
				return func(w http.ResponseWriter, r *http.Request, stream bool) {
					b := wire.Answer(partial)
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", fmt.Sprint(len(b)))
					w.WriteHeader(200)
					w.Write(b[:len(b)/2])
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler)
				}
			},
			want: protocol.CodeProviderTransport},
		{name: "HangsBeforeAnswering", plain: true, stream: true, hangs: true,
			answer: func(Wire) answerFunc {
				return func(w http.ResponseWriter, r *http.Request, stream bool) { <-r.Context().Done() }
			},
			want: protocol.CodeProviderTimeout},
		{name: "HangsMidBody", plain: true, hangs: true,
			answer: func(wire Wire) answerFunc {
				return func(w http.ResponseWriter, r *http.Request, stream bool) {
					b := wire.Answer(partial)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(200)
					w.Write(b[:len(b)/2])
					w.(http.Flusher).Flush()
					<-r.Context().Done()
				}
			},
			want: protocol.CodeProviderTimeout},
		{name: "HangsMidStream", stream: true, hangs: true,
			answer: streamThen(func(w http.ResponseWriter, r *http.Request, wire Wire, next []byte) {
				<-r.Context().Done()
			}),
			want: protocol.CodeProviderTimeout},
	}
}

func runFailures(t *testing.T, newProvider NewProvider, wire Wire) {
	for _, fc := range failures() {
		for _, stream := range []bool{false, true} {
			if (stream && !fc.stream) || (!stream && !fc.plain) {
				continue
			}
			t.Run(fc.name+"/"+modeName(stream), func(t *testing.T) {
				if fc.hangs {
					t.Parallel() // these wait out Timeout
				}
				srv := newServer(t, wire, fc.answer(wire))
				p := newProvider(t, srv.srv)
				// A client that ignores its Timeout still ends here, and
				// the elapsed time shows it.
				ctx, cancel := context.WithTimeout(t.Context(), 20*Timeout)
				defer cancel()
				start := time.Now()
				turn, _, err := call(t, ctx, p, Transcript(), stream)
				elapsed := time.Since(start)
				if err == nil {
					t.Fatalf("call = %+v, want a %s error", turn, fc.want)
				}
				pe := checkCode(t, err, fc.want)
				t.Logf("error: %v", pe)
				if pe.Retryable() != fc.want.Retryable() {
					t.Errorf("Retryable() = %v, want %v", pe.Retryable(), fc.want.Retryable())
				}
				if lo, hi := fc.retryAfter[0], fc.retryAfter[1]; pe.RetryAfterMS < lo || pe.RetryAfterMS > hi {
					t.Errorf("RetryAfterMS = %d, want %d..%d", pe.RetryAfterMS, lo, hi)
				}
				if !strings.Contains(pe.Message, p.Name()) {
					t.Errorf("Message = %q, want it to name the provider %q", pe.Message, p.Name())
				}
				if strings.Contains(pe.Error(), APIKey) {
					t.Errorf("error %q shows the API key", pe.Error())
				}
				if fc.hangs && elapsed > 8*Timeout {
					t.Errorf("the call gave up after %v; give the client Timeout: providertest.Timeout (%v)", elapsed, Timeout)
				}
				if n := len(srv.received()); n != 1 {
					t.Errorf("server got %d requests, want 1: the client must not retry by itself", n)
				}
			})
		}
	}
}

func runCalls(t *testing.T, newProvider NewProvider, wire Wire) {
	turn := answerTurns()["TextAndToolCalls"]

	t.Run("Concurrent", func(t *testing.T) {
		srv := newServer(t, wire, answerWith(wire, turn))
		p := newProvider(t, srv.srv)
		want := wire.Expect(turn)
		want.Served = p.Name()
		const n = 8
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				stream := i%2 == 1
				var got *protocol.Turn
				var err error
				if stream {
					got, err = p.(provider.Streamer).CompleteStream(t.Context(), Transcript(), nil)
				} else {
					got, err = p.Complete(t.Context(), Transcript())
				}
				if err != nil {
					t.Errorf("call %d (%s): %v", i, modeName(stream), err)
					return
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("call %d (%s): turn mismatch (-want +got):\n%s", i, modeName(stream), diff)
				}
			})
		}
		wg.Wait()
	})

	t.Run("LeavesRequestAlone", func(t *testing.T) {
		srv := newServer(t, wire, answerWith(wire, turn))
		p := newProvider(t, srv.srv)
		for _, stream := range []bool{false, true} {
			req := Transcript()
			if _, _, err := call(t, t.Context(), p, req, stream); err != nil {
				t.Fatalf("%s call: %v", modeName(stream), err)
			}
			if diff := cmp.Diff(Transcript(), req); diff != "" {
				t.Errorf("%s call changed the request (-before +after):\n%s", modeName(stream), diff)
			}
		}
	})

	t.Run("CancelledBeforeSending", func(t *testing.T) {
		srv := newServer(t, wire, answerWith(wire, turn))
		p := newProvider(t, srv.srv)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, stream := range []bool{false, true} {
			_, _, err := call(t, ctx, p, Transcript(), stream)
			checkCode(t, err, protocol.CodeProviderTransport)
		}
		if n := len(srv.received()); n != 0 {
			t.Errorf("server got %d requests, want none", n)
		}
	})

	t.Run("RefusesBeforeSending", func(t *testing.T) {
		tests := []struct {
			name      string
			edit      func(*protocol.CompletionRequest)
			wantField string
		}{
			{name: "UnknownRole", edit: func(r *protocol.CompletionRequest) { r.Messages[0].Role = "system" }, wantField: "messages[0].role"},
			{name: "ToolResultWithoutCallID", edit: func(r *protocol.CompletionRequest) { r.Messages[2].ToolCallID = "" }, wantField: "messages[2].tool_call_id"},
			{name: "SchemaNotJSON", edit: func(r *protocol.CompletionRequest) { r.Tools[1].Parameters = json.RawMessage(`{"type":`) }, wantField: "tools[1].parameters"},
			{name: "NoModel", edit: func(r *protocol.CompletionRequest) { r.Model = "" }, wantField: "model"},
		}
		srv := newServer(t, wire, answerWith(wire, turn))
		p := newProvider(t, srv.srv)
		for _, tt := range tests {
			for _, stream := range []bool{false, true} {
				req := Transcript()
				tt.edit(req)
				_, _, err := call(t, t.Context(), p, req, stream)
				pe := checkCode(t, err, protocol.CodeProviderRequest)
				if pe.Field != tt.wantField {
					t.Errorf("%s (%s): Field = %q, want %q", tt.name, modeName(stream), pe.Field, tt.wantField)
				}
			}
		}
		if _, _, err := call(t, t.Context(), p, nil, false); err == nil {
			t.Errorf("Complete(nil) succeeded, want CodeProviderRequest")
		} else {
			checkCode(t, err, protocol.CodeProviderRequest)
		}
		if n := len(srv.received()); n != 0 {
			t.Errorf("server got %d requests, want none", n)
		}
	})
}

// checkCode checks err is a *protocol.Error of the given code that
// errors.Is finds by code, and returns it.
func checkCode(t *testing.T, err error, want protocol.Code) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v (%T), want a *protocol.Error %s", err, err, want)
	}
	if pe.Code != want {
		t.Fatalf("error code = %s, want %s; error: %v", pe.Code, want, pe)
	}
	if !errors.Is(err, &protocol.Error{Code: want}) {
		t.Errorf("errors.Is(err, code %s) = false", want)
	}
	if pe.Name != want.String() {
		t.Errorf("error Name = %q, want %q", pe.Name, want.String())
	}
	return pe
}
