package sandboxer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/mcptools"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// The MCP sessions of the runs this node holds. They live with the
// workspace: one set per agent tree (the op's Tree, else its run), opened
// by the tree's first open here, shared by every run of the tree that
// opens here, and closed when the last of them closes, or when the
// sandboxer stops. A node that restarted has none: the first call of an
// MCP tool opens the tree's server again, from the contract the op
// carries. A server that dies stays dead: every later reply of the tree's
// ops says so (protocol.MCPSession with Error), and its coordinator fails
// the run.

// mcpStartTimeout bounds starting (or dialling) one server and listing its
// tools.
const mcpStartTimeout = 30 * time.Second

// mcpTree is the MCP sessions of one agent tree on this node.
type mcpTree struct {
	// start serialises the starts of the tree's servers, so that two runs
	// opening at once start each server once. It is taken before
	// mcpSessions.mu, never while it is held.
	start   sync.Mutex
	runs    map[string]bool              // the tree's runs holding the sessions
	servers map[string]*mcptools.Session // by server name
}

// mcpSessions is the node's MCP sessions, by tree.
type mcpSessions struct {
	mu    sync.Mutex // guards trees, runTree and every mcpTree's runs and servers
	trees map[string]*mcpTree
	// runTree is the tree of each run holding sessions.
	runTree map[string]string
}

// treeKey is the key of the op's tree.
func treeKey(op *protocol.SandboxOp) string {
	if op.Tree != "" {
		return op.Tree
	}
	return op.Run
}

// joinTree returns op's tree, creating it, with op's run among its
// holders.
func (s *Sandboxer) joinTree(op *protocol.SandboxOp) *mcpTree {
	m := &s.mcp
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.trees == nil {
		m.trees, m.runTree = map[string]*mcpTree{}, map[string]string{}
	}
	key := treeKey(op)
	t, ok := m.trees[key]
	if !ok {
		t = &mcpTree{runs: map[string]bool{}, servers: map[string]*mcptools.Session{}}
		m.trees[key] = t
	}
	t.runs[op.Run] = true
	m.runTree[op.Run] = key
	return t
}

// openMCP opens the MCP servers of op's contract for its tree, those the
// tree has open already shared, and returns the tools they offer and how
// each stands. A server that cannot be started, or is dead, fails the
// open: a *protocol.Error (CodeMCP, CodeRefused when the policy does not
// allow it, CodeUnsupported when no backend here can hold it), and the
// run lets go of the tree.
func (s *Sandboxer) openMCP(ctx context.Context, op *protocol.SandboxOp, dir string) ([]protocol.ToolSpec, []protocol.MCPSession, error) {
	t := s.joinTree(op)
	var tools []protocol.ToolSpec
	var states []protocol.MCPSession
	for i := range op.MCP.Servers {
		srv := &op.MCP.Servers[i]
		sess, err := s.mcpServer(ctx, t, op, srv, dir)
		if err != nil {
			s.closeMCP(op.Run)
			return nil, nil, err
		}
		if lost := sess.Lost(); lost != nil {
			s.closeMCP(op.Run)
			return nil, nil, lost
		}
		tools = append(tools, sess.Tools()...)
		states = append(states, sessionState(sess))
	}
	return tools, states, nil
}

// mcpServer returns the tree's session of srv, starting it when the tree
// has none: after a restart of this node, or at the tree's first open.
func (s *Sandboxer) mcpServer(ctx context.Context, t *mcpTree, op *protocol.SandboxOp, srv *protocol.MCPServer, dir string) (*mcptools.Session, error) {
	t.start.Lock()
	defer t.start.Unlock()
	s.mcp.mu.Lock()
	sess, ok := t.servers[srv.Name]
	s.mcp.mu.Unlock()
	if ok {
		return sess, nil
	}
	sess, err := s.startServer(ctx, op, srv, dir)
	if err != nil {
		return nil, err
	}
	s.mcp.mu.Lock()
	held := len(t.runs) > 0
	if held {
		t.servers[srv.Name] = sess
	}
	s.mcp.mu.Unlock()
	if !held {
		// Every run of the tree let go while it started (a cancel).
		sess.Close()
		return nil, protocol.Errorf(protocol.CodeMCP, "the run let go of its MCP servers while %q started", srv.Name)
	}
	return sess, nil
}

// startServer checks srv against op's policy and starts it: a stdio
// server on the backend op's contract names, in the workspace dir, an
// HTTP server dialled under the policy's net rules.
func (s *Sandboxer) startServer(ctx context.Context, op *protocol.SandboxOp, srv *protocol.MCPServer, dir string) (*mcptools.Session, error) {
	log := s.log.With("run", op.Run, "tree", treeKey(op), "mcp", srv.Name, "transport", srv.Transport())
	if op.Policy == nil {
		return nil, protocol.Errorf(protocol.CodeRefused, "no policy verdict covers the MCP server %q", srv.Name)
	}
	pol, err := compilePolicy(op.Policy)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeRefused, "the run's policy does not compile: %s", err.Error())
	}
	if why := gate.Server(pol, srv); why != "" {
		return nil, protocol.Errorf(protocol.CodeRefused, "%s", why)
	}
	ctx, cancel := context.WithTimeout(ctx, mcpStartTimeout)
	defer cancel()
	var sess *mcptools.Session
	if srv.URL != "" {
		client := mcptools.Client(func(host, port string) error {
			// Every connection, not the first alone: the URL's host is
			// the only one the client may reach.
			if v := pol.CheckNet(host, port); v.Effect != policy.Allow {
				return protocol.Errorf(protocol.CodeRefused, "%s", v.Refusal())
			}
			return nil
		})
		sess, err = mcptools.HTTP(ctx, srv.Name, srv.URL, client)
	} else {
		sess, err = s.startStdio(ctx, op, srv, dir)
	}
	if err != nil {
		log.Warn("MCP server did not start", "err", err)
		return nil, err
	}
	attrs := []any{"tools", len(sess.Tools()), "took", sess.Took()}
	if p := sess.Process(); p != nil {
		attrs = append(attrs, "backend", p.Report.Backend, "pid", p.Pid)
	}
	if len(sess.Skipped()) > 0 {
		attrs = append(attrs, "skipped", sess.Skipped())
	}
	log.Info("MCP server connected", attrs...)
	return sess, nil
}

// startStdio starts a stdio server in the workspace on the contract's
// backend, which must be a sandbox.Starter.
func (s *Sandboxer) startStdio(ctx context.Context, op *protocol.SandboxOp, srv *protocol.MCPServer, dir string) (*mcptools.Session, error) {
	var spec protocol.SandboxSpec
	if op.Sandbox != nil {
		spec = *op.Sandbox
	}
	b, err := s.backend(spec.Backend)
	if err != nil {
		return nil, err
	}
	st, ok := b.(sandbox.Starter)
	if !ok {
		return nil, protocol.FieldError(protocol.CodeUnsupported, "sandbox.backend",
			"run the contract on the native backend (or the floor, where its operator allows it), or give the server as a url",
			"the %s backend runs commands to completion and cannot hold the MCP stdio server %q; it is not started outside a sandbox", b.Name(), srv.Name)
	}
	env := slices.Clone(s.cfg.CmdEnv)
	for _, k := range slices.Sorted(maps.Keys(srv.Env)) {
		v := srv.Env[k]
		if v == protocol.RedactedValue {
			return nil, protocol.Errorf(protocol.CodeMCP, "the MCP server %q cannot be started again: the values of its env are secrets the trace does not keep, and this run was resumed from its trace; submit the contract again", srv.Name)
		}
		env = append(env, k+"="+v)
	}
	lim := spec.Limits.WithDefaults()
	p, err := st.Start(ctx, sandbox.Spec{Argv: srv.Command, Dir: dir, Env: env, Limits: lim, Network: spec.Network})
	if err != nil {
		pe := protocol.AsError(err)
		return nil, protocol.Errorf(protocol.CodeMCP, "the MCP server %q could not be started: %s", srv.Name, pe.Message)
	}
	return mcptools.Stdio(ctx, srv.Name, p)
}

// sessionState is how sess stands, for a reply.
func sessionState(sess *mcptools.Session) protocol.MCPSession {
	st := protocol.MCPSession{Server: sess.Server(), Transport: sess.Transport(), ConnectMS: sess.Took().Milliseconds(), Skipped: sess.Skipped(), Error: sess.Lost()}
	if p := sess.Process(); p != nil {
		st.Backend, st.Unsandboxed = p.Report.Backend, p.Report.Unsandboxed
	}
	for _, t := range sess.Tools() {
		st.Tools = append(st.Tools, t.Name)
	}
	return st
}

// mcpCall carries out a call of an MCP tool in w: on the tree's session
// of its server, opened again if this node has none (a restart). Every
// failure is an observation; a server that is gone is also in lost.
func (s *Sandboxer) mcpCall(ctx context.Context, w *workspace, op *protocol.SandboxOp, obs *protocol.Observation) *protocol.Observation {
	call := op.Call
	server, tool, _ := protocol.SplitMCPTool(call.Name)
	fail := func(msg string) *protocol.Observation {
		obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, fmt.Sprintf("[%s failed] %s", call.Name, msg)
		return obs
	}
	srv := op.MCP.Server(server)
	if srv == nil {
		return fail(fmt.Sprintf("the run has no MCP server %q", server))
	}
	sess, err := s.mcpServer(ctx, s.joinTree(op), op, srv, w.dir)
	if err != nil {
		return fail(protocol.AsError(err).Message)
	}
	lim := protocol.Limits{}.WithDefaults()
	if op.Sandbox != nil {
		lim = op.Sandbox.Limits.WithDefaults()
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(lim.WallSecs)*time.Second)
	defer cancel()
	res, err := sess.Call(cctx, tool, call.Arguments, lim.OutputBytes)
	switch {
	case errors.Is(err, protocol.ErrMCP):
		return fail(protocol.AsError(err).Message + ". The run cannot go on without it.")
	case err != nil && cctx.Err() != nil && ctx.Err() == nil:
		return fail(fmt.Sprintf("the server did not answer within the %d s a call may take (sandbox.limits.wall_secs)", lim.WallSecs))
	case err != nil:
		return fail(err.Error())
	case res.IsError:
		return fail(res.Content)
	}
	obs.Status, obs.Content = protocol.CallOK, res.Content
	return obs
}

// lostMCP is how the servers of op's tree that died stand, for the reply
// of any op of the tree.
func (s *Sandboxer) lostMCP(op *protocol.SandboxOp) []protocol.MCPSession {
	m := &s.mcp
	m.mu.Lock()
	t, ok := m.trees[treeKey(op)]
	var sessions []*mcptools.Session
	if ok {
		sessions = slices.Collect(maps.Values(t.servers))
	}
	m.mu.Unlock()
	var out []protocol.MCPSession
	for _, sess := range sessions {
		if sess.Lost() != nil {
			out = append(out, sessionState(sess))
		}
	}
	slices.SortFunc(out, func(a, b protocol.MCPSession) int { return strings.Compare(a.Server, b.Server) })
	return out
}

// closeMCP lets go of run's hold on its tree's sessions, and closes them
// when it was the last run holding them: it returns how those stood.
func (s *Sandboxer) closeMCP(run string) []protocol.MCPSession {
	m := &s.mcp
	m.mu.Lock()
	key, ok := m.runTree[run]
	if !ok {
		m.mu.Unlock()
		return nil
	}
	delete(m.runTree, run)
	t := m.trees[key]
	delete(t.runs, run)
	if len(t.runs) > 0 {
		m.mu.Unlock()
		return nil
	}
	delete(m.trees, key)
	sessions := slices.Collect(maps.Values(t.servers))
	t.servers = map[string]*mcptools.Session{}
	m.mu.Unlock()
	return s.closeSessions(key, sessions)
}

// closeSessions closes sessions side by side and returns how each stood
// before it closed.
func (s *Sandboxer) closeSessions(tree string, sessions []*mcptools.Session) []protocol.MCPSession {
	out := make([]protocol.MCPSession, len(sessions))
	var wg sync.WaitGroup
	for i, sess := range sessions {
		out[i] = sessionState(sess)
		wg.Go(func() {
			sess.Close()
			s.log.Info("MCP server disconnected", "tree", tree, "mcp", sess.Server())
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b protocol.MCPSession) int { return strings.Compare(a.Server, b.Server) })
	return out
}

// closeAllMCP closes every session this node holds: the sandboxer stops.
func (s *Sandboxer) closeAllMCP() {
	m := &s.mcp
	m.mu.Lock()
	trees := m.trees
	m.trees, m.runTree = nil, nil
	m.mu.Unlock()
	for key, t := range trees {
		s.mcp.mu.Lock()
		sessions := slices.Collect(maps.Values(t.servers))
		s.mcp.mu.Unlock()
		s.closeSessions(key, sessions)
	}
}
