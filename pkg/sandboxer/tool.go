package sandboxer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness/internal/fault"
	"github.com/ioharness/harness/internal/gate"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/tools"
)

// env is what the tools run op with in w: the backend its contract asks
// for (one that refuses every command, saying why, when this node will
// not run it), metered; its caps and network permission; the commands'
// environment; and a judge of every path under its policy.
func (s *Sandboxer) env(op *protocol.SandboxOp, w *workspace) *tools.Env {
	var spec protocol.SandboxSpec
	if op.Sandbox != nil {
		spec = *op.Sandbox
	}
	backend, err := s.backend(spec.Backend)
	if err != nil {
		backend = refusing{err}
	}
	env := &tools.Env{
		Workspace: w.ws,
		Sandbox:   s.metered(backend),
		Limits:    spec.Limits.WithDefaults(),
		Network:   spec.Network,
		CmdEnv:    s.cfg.CmdEnv,
	}
	if op.Git != nil {
		env.GitAuthor = op.Git.Author // the contract's; the model's arguments never reach it
	}
	// Every file tool asks the run's policy about each path it would
	// touch, link targets included; grep and find omit what it refuses.
	// A policy that is missing or does not compile allows nothing. (tool
	// puts in a judge of its own, the same but keeping the verdict.)
	env.Judge = toolJudge(op, s.gateOf(op), new(policy.Verdict))
	return env
}

// tool runs one tool call. A failure is an observation, written for the
// model.
func (s *Sandboxer) tool(ctx context.Context, w *workspace, op *protocol.SandboxOp) *protocol.Observation {
	call := op.Call
	if call == nil {
		return &protocol.Observation{IsError: true, Status: protocol.CallFailed, Content: "[tool failed] no tool call"}
	}
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name}
	if _, _, ok := protocol.SplitMCPTool(call.Name); ok && op.MCP != nil {
		// A tool of one of the run's MCP servers: no built-in has such a
		// name (tools.NewSet refuses one), so none is shadowed.
		if refusal := s.covered(op); refusal != "" {
			obs.Status, obs.IsError, obs.Content = protocol.CallRefused, true, refusal
			return obs
		}
		return s.mcpCall(ctx, w, op, obs)
	}
	t, ok := s.lookup(call.Name)
	if call.Name == readSkillTool {
		t, ok = tools.ReadFile{}, true // on the run's skills snapshot, below
	}
	if !ok {
		obs.Status, obs.IsError = protocol.CallFailed, true
		obs.Content = fmt.Sprintf("[unknown tool] %q is not a tool here; the tools are: %s", call.Name, strings.Join(s.cfg.Tools.Names(), ", "))
		return obs
	}
	// The coordinator decided; the sandboxer decides again, where the
	// effect would happen, and performs nothing its verdict does not cover.
	if refusal := s.covered(op); refusal != "" {
		obs.Status, obs.IsError, obs.Content = protocol.CallRefused, true, refusal
		return obs
	}
	env := s.env(op, w)
	if call.Name == readSkillTool {
		// A skill of the run's skills snapshot: read as read_file reads,
		// links judged by their targets, in the snapshot's own directory,
		// and only a file the catalogue names.
		ws, failed := s.skillReader(ctx, op)
		if failed != "" {
			obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, failed
			return obs
		}
		env.Workspace = ws
	}
	// The sandboxer's own verdict on what the call really touches: the
	// targets of the links on its path, which only this node can see; a
	// refusal is recorded with the rule that made it.
	var refused policy.Verdict
	env.Judge = toolJudge(op, s.gateOf(op), &refused)
	out, err := t.Invoke(sandbox.WithRun(ctx, op.Run, op.OpID), env, call.Arguments)
	fault.Hit(fault.AfterToolEffect)
	if errors.Is(err, protocol.ErrRefused) {
		obs.Status, obs.IsError, obs.Content = protocol.CallRefused, true, protocol.AsError(err).Message
		if refused.Effect == policy.Ask || refused.Effect == policy.Deny { // unset when no policy covers the op
			obs.Refused = &protocol.Refusal{Act: refused.Act.String(), Target: refused.Target, Effect: refused.Effect.String(), Rule: refused.Rule, Layer: refused.Layer}
		}
		return obs
	}
	if err != nil {
		obs.Status, obs.IsError, obs.Content = protocol.CallFailed, true, tools.Failure(call.Name, err)
		return obs
	}
	content := out.Content
	if s.cfg.Tools.Extra(call.Name) {
		content = tools.Bound(content, env.EntryCap) // the built-ins bound their own
	}
	obs.Status, obs.Content, obs.Changed, obs.Exec, obs.Image = protocol.CallOK, content, out.Changed, out.Exec, out.Image
	return obs
}

// lookup returns the tool called name: one of Tools, else one of
// GitTools.
func (s *Sandboxer) lookup(name string) (tools.Tool, bool) {
	if t, ok := s.cfg.Tools.Get(name); ok {
		return t, true
	}
	return s.cfg.GitTools.Get(name)
}

// readOnly reports whether the tool called name changes nothing.
func (s *Sandboxer) readOnly(name string) bool {
	if _, ok := s.cfg.Tools.Get(name); ok {
		return s.cfg.Tools.ReadOnly(name)
	}
	return s.cfg.GitTools.ReadOnly(name)
}

// offered are the specs of the tools a workspace is offered: Tools (their
// extras only when the run's contract names them, want), and GitTools
// when it is a git repository of its own (repo).
func (s *Sandboxer) offered(repo bool, want []string) []protocol.ToolSpec {
	specs := s.cfg.Tools.Offered(want)
	if !repo {
		return specs
	}
	for _, g := range s.cfg.GitTools.Specs() {
		if _, dup := s.cfg.Tools.Get(g.Name); !dup {
			specs = append(specs, g)
		}
	}
	return specs
}

// isRepo reports whether dir holds a git repository of its own: a .git
// directory (not a gitdir file or a link) at its root.
func isRepo(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil && fi.IsDir()
}

// covered takes the sandboxer's own verdict on a tool call and returns why
// it is refused, or "" when the policy allows it (or asks, and a person's
// approval comes with it).
func (s *Sandboxer) covered(op *protocol.SandboxOp) string {
	if op.Policy == nil {
		return "[refused by the sandboxer] no policy verdict covers this operation"
	}
	pol, err := compilePolicy(op.Policy)
	if err != nil {
		return "[refused by the sandboxer] the run's policy does not compile: " + err.Error()
	}
	v, bad := gate.VerdictOf(pol, op.Call, s.gateOf(op))
	switch {
	case bad != "":
		return bad
	case v.Effect == policy.Deny, v.Effect == policy.Ask && op.Approval == "":
		return v.Refusal()
	}
	return ""
}

// gateOf is what the op's call's tool declares it acts on, if it is a
// tool of this node's that says.
func (s *Sandboxer) gateOf(op *protocol.SandboxOp) *protocol.ToolGate {
	if op.Call == nil {
		return nil
	}
	return s.cfg.Tools.GateOf(op.Call.Name)
}

// refusing is the backend of an op whose contract asks for one this node
// does not have: every command fails to start, saying so.
type refusing struct{ err error }

func (r refusing) Name() string { return "none" }

func (r refusing) Run(context.Context, sandbox.Spec) (*sandbox.Result, error) { return nil, r.err }
