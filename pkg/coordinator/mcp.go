package coordinator

import (
	"sync"
	"time"

	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/protocol"
)

// The MCP servers of a run are the sandboxer's: it starts or dials them
// when the workspace opens, answers the calls of their tools
// (mcp__<server>__<tool>, dispatched like any tool it offers, each judged
// as exec of its name), and closes them with the workspace. The
// coordinator refuses a run whose policy would not let a server start,
// publishes what the sandboxer reports (connect, tools offered, calls,
// disconnect), and fails the run with the typed error when a server dies.

// mcpRefusal says why the run's policy does not let one of its MCP servers
// start or be dialled, or "" when it lets them all.
func (d *driver) mcpRefusal() string {
	m := d.s.contract.MCP
	if m == nil {
		return ""
	}
	for i := range m.Servers {
		if why := gate.Server(d.pol, &m.Servers[i]); why != "" {
			return why
		}
	}
	return ""
}

// mcpConnected publishes the servers an open reported: each connect and
// each tool it offers.
func (d *driver) mcpConnected(states []protocol.MCPSession) {
	for _, st := range states {
		text := st.Transport
		if st.Backend != "" {
			text += " on " + st.Backend
			if st.Unsandboxed {
				text += " (unsandboxed)"
			}
		}
		d.c.emit(d.s.run, d.s.step, protocol.EventMCPConnect, &protocol.Event{Target: st.Server, Text: text, DurationMS: st.ConnectMS})
		for _, t := range st.Tools {
			d.c.emit(d.s.run, d.s.step, protocol.EventMCPToolOffered, &protocol.Event{Target: st.Server, Tool: t})
		}
		if len(st.Skipped) > 0 {
			d.log.Warn("MCP server tools not offered", "mcp", st.Server, "skipped", st.Skipped)
		}
	}
}

// mcpCalled publishes a call of an MCP tool, with how long it took and
// what came of it.
func (d *driver) mcpCalled(step int, obs *protocol.Observation, took time.Duration) {
	server, _, _ := protocol.SplitMCPTool(obs.Tool)
	d.c.emit(d.s.run, step, protocol.EventMCPCall, &protocol.Event{Tool: obs.Tool, Target: server, DurationMS: took.Milliseconds(),
		Status: obs.State(), IsError: obs.IsError, Text: clip(obs.Content, 2000)})
}

// mcpLostIn notes the servers a reply says died: each is published once,
// and the first is the error the run fails with once its step is
// committed.
func (d *driver) mcpLostIn(step int, states []protocol.MCPSession) {
	for _, st := range states {
		if st.Error == nil || d.mcpGone[st.Server] {
			continue
		}
		if d.mcpGone == nil {
			d.mcpGone = map[string]bool{}
		}
		d.mcpGone[st.Server] = true
		d.log.Warn("MCP server died", "mcp", st.Server, "err", st.Error)
		d.c.emit(d.s.run, step, protocol.EventMCPDisconnect, &protocol.Event{Target: st.Server, IsError: true, Error: st.Error, Text: st.Error.Message})
		d.c.emit(d.s.run, step, protocol.EventError, &protocol.Event{Target: st.Server, IsError: true, Error: st.Error, Text: st.Error.Message})
		if d.mcpLost == nil {
			d.mcpLost = st.Error
		}
	}
}

// mcpClosed publishes the servers a close disconnected.
func (d *driver) mcpClosed(states []protocol.MCPSession) {
	for _, st := range states {
		if d.mcpGone[st.Server] {
			continue // its death was published
		}
		d.c.emit(d.s.run, d.s.step, protocol.EventMCPDisconnect, &protocol.Event{Target: st.Server, Text: "closed with the run"})
	}
}

// mcpSecrets keeps, in this coordinator's memory alone, the MCP servers of
// the runs it admitted whose env holds values: the trace keeps the
// contract with them redacted, so that a run of this coordinator picked
// up again from its trace (woken from a pause for a person, which closed
// its workspace and its servers) can start its servers again. A run
// resumed by another coordinator, or after a restart, has them no longer,
// and the sandboxer refuses to start such a server, saying why. An entry
// goes when the run finishes here.
type mcpSecrets struct {
	mu   sync.Mutex
	runs map[string]*protocol.MCPSpec
}

// keep remembers the servers of run's contract, when their env has values.
func (m *mcpSecrets) keep(run string, c *protocol.Contract) {
	if c.Redacted() == c {
		return // nothing secret
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil {
		m.runs = map[string]*protocol.MCPSpec{}
	}
	m.runs[run] = c.MCP
}

// restore returns c with the servers kept for run, when c is the trace's
// redacted copy of the contract they came with; else c.
func (m *mcpSecrets) restore(run string, c *protocol.Contract) *protocol.Contract {
	m.mu.Lock()
	spec, ok := m.runs[run]
	m.mu.Unlock()
	if !ok || c == nil || c.MCP == nil || len(c.MCP.Servers) != len(spec.Servers) {
		return c
	}
	for i := range spec.Servers {
		if c.MCP.Servers[i].Name != spec.Servers[i].Name {
			return c
		}
	}
	out := *c
	out.MCP = spec
	return &out
}

// forget lets go of run's servers: it finished.
func (m *mcpSecrets) forget(run string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, run)
}
