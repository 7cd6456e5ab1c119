package sandboxer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/wire"
)

// BenchmarkReadFileOp measures one read_file call through a sandboxer,
// the tool op a step of an agent exploring a workspace sends, beside a
// bare NATS request to a responder that answers at once, on the same
// server in the same run (the floor of the round trip):
//
//   - bare-request: a request and its reply, nothing done with them;
//
//   - read-file: the op decoded, judged under the default policy on the
//     sandboxer's own side, the file read through the workspace's links
//     check, and the observation answered.
//
//     go test -run '^$' -bench ReadFileOp ./pkg/sandboxer
func BenchmarkReadFileOp(b *testing.B) {
	srv := testkit.NATS(b)
	nc := testkit.Conn(b, srv)
	b.Run("bare-request", func(b *testing.B) {
		echo := testkit.Conn(b, srv)
		sub, err := echo.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := echo.Flush(); err != nil {
			b.Fatal(err)
		}
		body := []byte(`{"op_id":"x"}`)
		for b.Loop() {
			if _, err := nc.Request("bench.echo", body, 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-file", func(b *testing.B) {
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		assets, err := wire.Ensure(b.Context(), js, wire.Config{})
		if err != nil {
			b.Fatal(err)
		}
		ws := b.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("read the next note"), 0o644); err != nil {
			b.Fatal(err)
		}
		sb, err := sandboxer.New(testkit.Conn(b, srv), sandboxer.Config{ID: "sb1", Roots: []string{ws}, Ops: assets.Ops, AllowFloor: true, Backends: []sandbox.Backend{floor.New()}})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- sb.Run(ctx) }()
		defer func() { cancel(); <-done }()
		<-sb.Ready()
		pol := policy.Default().Protocol()
		open, _ := json.Marshal(&protocol.SandboxOp{OpID: "bench.open", Run: "bench", Kind: protocol.OpOpen, Workspace: ws, Policy: pol, Sandbox: &protocol.SandboxSpec{}})
		testkit.CheckFor(b, 10*time.Second, 20*time.Millisecond, func() error {
			m, err := nc.Request(wire.SandboxOpenSubject, open, 10*time.Second)
			if err != nil {
				return err
			}
			if r := new(protocol.SandboxReply); json.Unmarshal(m.Data, r) != nil || r.Error != nil {
				return fmt.Errorf("open = %s", m.Data)
			}
			return nil
		})
		i := 0
		for b.Loop() {
			i++
			op, _ := json.Marshal(&protocol.SandboxOp{OpID: fmt.Sprintf("bench.%d.0.1", i), Run: "bench", Kind: protocol.OpTool, Workspace: ws, Policy: pol, Sandbox: &protocol.SandboxSpec{},
				Call: &protocol.ToolCall{ID: "c", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`)}})
			m, err := nc.Request(wire.SandboxOps("sb1"), op, 10*time.Second)
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
