// Package mcptools speaks to MCP servers through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) and offers their tools as
// harness tools: a Session is one server, started by a sandbox backend and
// spoken to over its standard input and output (Stdio), or dialled over
// streamable HTTP (HTTP); its tools are offered as mcp__<server>__<tool>
// with the server's own JSON schema, and Call calls one.
//
// It decides nothing: what may be started, dialled and called is the
// sandboxer's to check against the run's policy before it gets here.
package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// MaxTools bounds the tools taken from one server; the rest are skipped.
const MaxTools = 128

// maxDescription bounds a tool's description as offered to the model.
const maxDescription = 4096

// closeGrace is how long Close waits for a stdio server to exit once its
// input is closed, the polite way to stop it, before it is killed.
const closeGrace = 2 * time.Second

// codeRejected is the JSON-RPC code the SDK gives a request its transport
// could not deliver (over HTTP: the server could not be reached, or said
// the session is gone), which the SDK leaves for the caller to judge: a
// server that cannot be reached is gone.
const codeRejected = -32005

// validName is what providers accept as a function name.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Session is a connection to one MCP server. Its methods are safe for
// concurrent use.
type Session struct {
	server    string
	transport string
	cs        *mcp.ClientSession
	proc      *sandbox.Process // a stdio server's; nil over HTTP
	http      *http.Client     // an HTTP server's; nil over stdio
	tools     []protocol.ToolSpec
	skipped   []string
	took      time.Duration

	mu     sync.Mutex
	lost   *protocol.Error // why the server is gone, once it is
	closed bool
	gone   chan struct{} // closed when the connection ended, whoever ended it
}

// Stdio connects to server, running as proc (a sandbox.Starter's), over
// its standard input and output, and lists its tools. Errors: a
// *protocol.Error with CodeMCP saying why the server did not answer (how
// the process ended, and the tail of what it wrote to its standard error);
// proc is then killed.
func Stdio(ctx context.Context, server string, proc *sandbox.Process) (*Session, error) {
	s := &Session{server: server, transport: "stdio", proc: proc, gone: make(chan struct{})}
	began := time.Now()
	cs, err := newClient().Connect(ctx, &mcp.IOTransport{Reader: proc.Stdout, Writer: proc.Stdin}, nil)
	if err != nil {
		// A server that exits says how (the status, below, and what it
		// wrote to its standard error); one that hangs is killed.
		select {
		case <-proc.Done():
		case <-time.After(closeGrace):
		}
		proc.Kill()
		return nil, s.died(fmt.Sprintf("did not answer its initialisation (%s) and ended: %s", err.Error(), proc.Ended()))
	}
	s.cs = cs
	go s.watch()
	if err := s.list(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.took = time.Since(began)
	return s, nil
}

// HTTP dials server at url over streamable HTTP with client, and lists
// its tools. client's transport is where the caller checks every
// connection (see Dialer). Errors: a *protocol.Error with CodeMCP.
func HTTP(ctx context.Context, server, url string, client *http.Client) (*Session, error) {
	s := &Session{server: server, transport: "http", http: client, gone: make(chan struct{})}
	began := time.Now()
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client, DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := newClient().Connect(ctx, t, nil)
	if err != nil {
		client.CloseIdleConnections()
		return nil, protocol.Errorf(protocol.CodeMCP, "the MCP server %q at %s could not be reached or did not answer its initialisation: %s", server, url, err.Error())
	}
	s.cs = cs
	go s.watch()
	if err := s.list(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.took = time.Since(began)
	return s, nil
}

// newClient is the SDK's client as harness presents itself: no roots, no
// sampling, no elicitation; a server asks nothing of the run.
func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "harness", Version: version.Semver()},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
}

// list takes the server's tools, page by page, up to MaxTools.
func (s *Session) list(ctx context.Context) error {
	cursor := ""
	for {
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			if lost := s.lostBy(err); lost != nil {
				return lost
			}
			return protocol.Errorf(protocol.CodeMCP, "the MCP server %q did not list its tools: %s", s.server, err.Error())
		}
		for _, t := range res.Tools {
			s.take(t)
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			return nil
		}
		cursor = res.NextCursor
	}
}

// take offers t, or records why not.
func (s *Session) take(t *mcp.Tool) {
	name := protocol.MCPToolName(s.server, t.Name)
	switch {
	case len(s.tools) >= MaxTools:
		s.skipped = append(s.skipped, fmt.Sprintf("%s: over the %d tools taken from one server", t.Name, MaxTools))
		return
	case !validName.MatchString(name):
		s.skipped = append(s.skipped, fmt.Sprintf("%s: %q is not 1 to 64 letters, digits, '_' or '-', which providers require", t.Name, name))
		return
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := t.Description
	if len(desc) > maxDescription {
		desc = desc[:maxDescription]
	}
	s.tools = append(s.tools, protocol.ToolSpec{Name: name, Description: desc, Parameters: schema})
}

// watch notes the end of the connection: a stdio server's process
// exiting, or the SDK finding the connection closed.
func (s *Session) watch() {
	var why string
	if s.proc != nil {
		select {
		case <-s.proc.Done():
			why = s.proc.Ended()
		case <-waitChan(s.cs):
			// The pipes closed; the process ends with them, or is killed.
			select {
			case <-s.proc.Done():
				why = s.proc.Ended()
			case <-time.After(closeGrace):
				s.proc.Kill()
				why = "closed its output and was killed"
			}
		}
	} else {
		_ = s.cs.Wait()
		why = "closed the connection"
	}
	s.mu.Lock()
	if !s.closed && s.lost == nil {
		s.lost = s.diedLocked(why)
	}
	s.mu.Unlock()
	close(s.gone)
}

func waitChan(cs *mcp.ClientSession) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(c)
	}()
	return c
}

// died is the error of a server that is gone, why said in words.
func (s *Session) died(why string) *protocol.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.diedLocked(why)
}

func (s *Session) diedLocked(why string) *protocol.Error {
	msg := fmt.Sprintf("the MCP server %q %s", s.server, why)
	if s.proc != nil {
		if tail := strings.TrimSpace(s.proc.Stderr()); tail != "" {
			if len(tail) > 2000 {
				tail = "…" + tail[len(tail)-2000:]
			}
			msg += "; its standard error: " + tail
		}
	}
	return protocol.Errorf(protocol.CodeMCP, "%s", msg)
}

// lostBy returns why the server is gone when err says it is (the
// connection closed, the process ended), else nil: err is then the
// server's own answer to one request.
func (s *Session) lostBy(err error) *protocol.Error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != codeRejected {
		return nil
	}
	if s.proc != nil {
		// The pipe breaks a moment before the process is reaped: wait
		// for its status, to say how it ended.
		select {
		case <-s.proc.Done():
		case <-time.After(closeGrace):
		}
		select {
		case <-s.gone:
		case <-time.After(closeGrace):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil && !s.closed {
		s.lost = s.diedLocked("is gone: " + err.Error())
	}
	return s.lost
}

// Server is the server's name.
func (s *Session) Server() string { return s.server }

// Transport is "stdio" or "http".
func (s *Session) Transport() string { return s.transport }

// Process is a stdio server's process; nil over HTTP.
func (s *Session) Process() *sandbox.Process { return s.proc }

// Took is how long the start (or dial), the initialisation and the
// listing of the tools took.
func (s *Session) Took() time.Duration { return s.took }

// Tools are the tools offered, mcp__<server>__<tool> with the server's
// own input schema, in the server's order.
func (s *Session) Tools() []protocol.ToolSpec { return s.tools }

// Skipped are the server's tools not offered, each with why.
func (s *Session) Skipped() []string { return s.skipped }

// Lost returns why the server is gone (a *protocol.Error with CodeMCP),
// or nil while it lives. A session closed by Close is not lost.
func (s *Session) Lost() *protocol.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Result is what a call of a tool produced, rendered for the model.
type Result struct {
	// Content is the call's text content, bounded; what is not text is
	// named, not shown.
	Content string
	// IsError is the server's word that the call failed.
	IsError bool
}

// Call calls the server's tool (its own name, without the prefix) with
// args, a JSON object, and renders what it returned in at most limit
// bytes (head and tail). Errors: a *protocol.Error with CodeMCP when the
// server is gone (Lost says the same from then on); CodeBadArguments when
// args is not a JSON object; any other error is the server's refusal of
// the request (an unknown tool, invalid arguments) or ctx ending, and the
// server lives on.
func (s *Session) Call(ctx context.Context, tool string, args json.RawMessage, limit int) (*Result, error) {
	if lost := s.Lost(); lost != nil {
		return nil, lost
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, protocol.Errorf(protocol.CodeBadArguments, "the arguments are not a JSON object: %s", err.Error())
	}
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the call was cut off: %w", ctx.Err())
		}
		if lost := s.lostBy(err); lost != nil {
			return nil, lost
		}
		return nil, err
	}
	return &Result{Content: render(res, limit), IsError: res.IsError}, nil
}

// render writes a call's content as text: text as it is, what is not text
// named; a result with structured content only, as its JSON.
func render(res *mcp.CallToolResult, limit int) string {
	out := sandbox.NewCapture(limit)
	for i, c := range res.Content {
		if i > 0 {
			_, _ = out.Write([]byte("\n"))
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			_, _ = out.Write([]byte(c.Text))
		case *mcp.ImageContent:
			fmt.Fprintf(out, "[an image, %s, %d bytes, not shown]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(out, "[audio, %s, %d bytes, not shown]", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(out, "[a link to the resource %s]", c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				_, _ = out.Write([]byte(c.Resource.Text))
			} else if c.Resource != nil {
				fmt.Fprintf(out, "[the resource %s, %d bytes, not shown]", c.Resource.URI, len(c.Resource.Blob))
			}
		default:
			fmt.Fprintf(out, "[content of type %T, not shown]", c)
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			_, _ = out.Write(b)
		}
	}
	return out.String()
}

// Close ends the session: the connection is closed, and a stdio server,
// asked to exit by the end of its input, is killed with everything it
// started if it has not exited within a moment. It returns once nothing
// of the server is left here. Idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_ = s.cs.Close()
		close(done)
	}()
	if s.proc != nil {
		select {
		case <-s.proc.Done():
		case <-time.After(closeGrace):
		}
		s.proc.Kill()
	}
	select {
	case <-done:
	case <-time.After(closeGrace):
	}
	if s.http != nil {
		s.http.CloseIdleConnections()
	}
	select {
	case <-s.gone:
	case <-time.After(closeGrace):
	}
}
