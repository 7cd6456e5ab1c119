package sandboxer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/mcptest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandbox/native"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

// BenchmarkMCPStdioCall measures one call of an MCP stdio server's tool
// (the test server's echo) through the sandboxer, beside a bare call of
// the same server from the SDK in the same run:
//
//   - bare-sdk: the server started with the SDK's CommandTransport, and
//     ClientSession.CallTool, in this process;
//
//   - sandboxer-floor, sandboxer-native: a tool op over NATS to a
//     sandboxer holding the server's session (opened once), which checks
//     the call against the run's policy, journals it in its ops bucket
//     (its start and its result, so a crash makes it indeterminate), calls
//     the server and answers;
//
//   - sandboxer-floor-unjournaled: the same without the ops bucket.
//
//     go test -run '^$' -bench MCPStdioCall ./pkg/sandboxer
func BenchmarkMCPStdioCall(b *testing.B) {
	args := json.RawMessage(`{"text":"bench"}`)
	b.Run("bare-sdk", func(b *testing.B) {
		dir := b.TempDir()
		argv, env := mcptest.Install(b, dir)
		cmd := exec.Command(filepath.Join(dir, argv[0]), argv[1:]...)
		cmd.Dir, cmd.Env = dir, append(sandbox.MinimalEnv(), mcptest.ServeEnv+"="+env[mcptest.ServeEnv])
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(b.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		b.ResetTimer()
		for b.Loop() {
			res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "echo", Arguments: args})
			if err != nil || res.IsError {
				b.Fatalf("CallTool = %v, %v", res, err)
			}
		}
	})
	for _, bb := range []struct {
		name    string
		backend func(b *testing.B) sandbox.Backend
		journal bool
	}{
		{"sandboxer-floor", func(*testing.B) sandbox.Backend { return floor.New() }, true},
		{"sandboxer-floor-unjournaled", func(*testing.B) sandbox.Backend { return floor.New() }, false},
		{"sandboxer-native", func(b *testing.B) sandbox.Backend {
			n, err := native.New(native.Config{})
			if err != nil {
				b.Skipf("no native sandbox here: %v", err)
			}
			return n
		}, true},
	} {
		b.Run(bb.name, func(b *testing.B) {
			nc, run := benchMCPSandboxer(b, bb.backend(b), bb.journal)
			b.ResetTimer()
			i := 0
			for b.Loop() {
				i++
				op := &protocol.SandboxOp{OpID: fmt.Sprintf("%s.%d.0.1", run.Run, i), Run: run.Run, Kind: protocol.OpTool, Workspace: run.Workspace,
					Call: &protocol.ToolCall{ID: "c", Name: "mcp__srv__echo", Arguments: args}, Policy: run.Policy, Sandbox: run.Sandbox, MCP: run.MCP}
				data, _ := json.Marshal(op)
				m, err := nc.Request("harness.sandbox.sb1.op", data, 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				var r protocol.SandboxReply
				if err := json.Unmarshal(m.Data, &r); err != nil || r.Observation == nil || r.Observation.Status != protocol.CallOK {
					b.Fatalf("reply = %s", m.Data)
				}
			}
		})
	}
}

// benchMCPSandboxer starts a sandboxer on be (with an ops bucket when
// journal is set) and opens a run whose server is the test server, and
// returns a connection and the run's open op.
func benchMCPSandboxer(b *testing.B, be sandbox.Backend, journal bool) (*nats.Conn, *protocol.SandboxOp) {
	b.Helper()
	srv := testkit.NATS(b)
	nc := testkit.Conn(b, srv)
	cfg := sandboxer.Config{AllowFloor: true, ID: "sb1", Backends: []sandbox.Backend{be}}
	if journal {
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		assets, err := wire.Ensure(b.Context(), js, wire.Config{})
		if err != nil {
			b.Fatal(err)
		}
		cfg.Ops = assets.Ops
	}
	ws := b.TempDir()
	cfg.Roots = []string{ws}
	sb, err := sandboxer.New(testkit.Conn(b, srv), cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sb.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	<-sb.Ready()

	argv, env := mcptest.Install(b, ws)
	open := &protocol.SandboxOp{OpID: "bench.open", Run: "bench", Kind: protocol.OpOpen, Workspace: ws,
		Sandbox: &protocol.SandboxSpec{Backend: be.Name()},
		Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "bench", Rules: []protocol.Rule{
			{Act: "exec", Effect: "allow", Pattern: "./.mcp/server*"}, {Act: "exec", Effect: "allow", Pattern: "server*"},
			{Act: "exec", Effect: "allow", Pattern: "mcp__srv__*"}}}}},
		MCP: &protocol.MCPSpec{Servers: []protocol.MCPServer{{Name: "srv", Command: argv, Env: env}}}}
	data, _ := json.Marshal(open)
	var r protocol.SandboxReply
	testkit.CheckFor(b, 10*time.Second, 20*time.Millisecond, func() error {
		m, err := nc.Request(wire.SandboxOpenSubject, data, 10*time.Second)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Error != nil {
			return fmt.Errorf("open = %s", m.Data)
		}
		return nil
	})
	b.Cleanup(func() {
		closeOp, _ := json.Marshal(&protocol.SandboxOp{OpID: "bench.close", Run: "bench", Kind: protocol.OpClose})
		_, _ = nc.Request("harness.sandbox.sb1.op", closeOp, 10*time.Second)
		if pid := mcptest.Find(argv[1]); pid != 0 {
			b.Errorf("the server's process %d is left after the close", pid)
		}
	})
	return nc, open
}
