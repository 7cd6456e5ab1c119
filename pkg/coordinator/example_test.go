package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandboxer"
	"github.com/ioharness/harness/pkg/trace"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// Embed the three roles in a program of your own: a coordinator, a worker
// with its own provider and a sandboxer, each given a NATS connection and
// a config, against an embedded NATS server. Only public packages are
// used; a contract is submitted on the wire's submit subject, as any NATS
// client may, and its outcome read from the run index.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "harness-roles-")
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	_ = os.MkdirAll(ws, 0o755)

	ns, err := server.NewServer(&server.Options{JetStream: true, StoreDir: filepath.Join(dir, "jetstream"), DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Println("nats server not ready")
		return
	}
	connect := func(name string) *nats.Conn {
		nc, err := nats.Connect("", nats.InProcessServer(ns), nats.Name(name))
		if err != nil {
			panic(err)
		}
		return nc
	}

	// Each role ensures the streams and buckets itself (wire.Ensure), so
	// any may come up first; the sandboxer is handed the two buckets it
	// journals in.
	nc := connect("example")
	defer nc.Close()
	js, _ := jetstream.New(nc)
	assets, err := wire.Ensure(context.Background(), js, wire.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	co, err := coordinator.New(connect("harness-coordinator"), coordinator.Config{ID: "c1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	agent := provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{
		ID: "1", Name: "write_file", Arguments: json.RawMessage(`{"path":"hello.txt","content":"hello\n"}`)}}})
	wk, err := worker.New(connect("harness-worker"), agent, worker.Config{ID: "w1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := sandboxer.New(connect("harness-sandboxer"), sandboxer.Config{ID: "sb1", Roots: []string{ws}, AllowFloor: true,
		Ops: assets.Ops, Workspaces: assets.Workspaces, SnapshotDir: filepath.Join(dir, "snapshots")})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, role := range []interface{ Run(context.Context) error }{sb, wk, co} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = role.Run(ctx)
		}()
	}
	defer func() { stop(); wg.Wait() }()
	<-co.Ready() // a request nobody hears while no coordinator is up goes unanswered (its contract is stored all the same)

	contract, _ := json.Marshal(&protocol.Contract{
		Schema:       protocol.ContractSchema,
		Task:         "write hello.txt saying hello",
		Workspace:    protocol.Workspace{Root: ws},
		Verification: protocol.Verification{FileContains: &protocol.ContainsCheck{Path: "hello.txt", Needle: "hello"}},
		Policy: &protocol.Policy{Layers: []protocol.Layer{{Name: "example", Rules: []protocol.Rule{
			{Act: "write", Effect: "allow", Pattern: "hello.txt"}}}}},
	})
	// A request on harness.submit, as `nats req` makes, is answered by a
	// coordinator once the run's first record is durable: the run id, or a
	// typed error. The message id is the idempotency key.
	msg := &nats.Msg{Subject: wire.SubjectSubmit, Data: contract, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, "example-1")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := nc.RequestMsgWithContext(wctx, msg)
	if err != nil {
		fmt.Println("no coordinator answered:", err)
		return
	}
	var reply protocol.SubmitReply
	if err := json.Unmarshal(m.Data, &reply); err != nil || reply.Error != nil {
		fmt.Println("refused:", err, reply.Error)
		return
	}
	st, err := trace.NewIndex(assets.Runs, js).Wait(wctx, reply.Run, func(st *protocol.RunState) bool { return st.Status != protocol.StatusRunning })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Outcome, "after", st.Step, "step")
	// Output: success after 1 step
}
