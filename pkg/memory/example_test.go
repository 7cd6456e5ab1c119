package memory_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/memory"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// Remember notes about a workspace and read them back, as a later run's
// admission does; a long value is cut, and a full memory forgets its
// oldest notes first.
func ExampleStore_Put() {
	dir, _ := os.MkdirTemp("", "harness-memory-")
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, DontListen: true, NoLog: true, NoSigs: true})
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
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	assets, err := wire.Ensure(context.Background(), js, wire.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	s := memory.New(assets.Memory)
	ws := protocol.Workspace{Root: "/srv/checkout"}
	_, _ = s.Put(ctx, ws, protocol.Note{Key: "test", Value: "go test ./... (needs no network)", Run: "r1", Step: 3})
	_, _ = s.Put(ctx, ws, protocol.Note{Key: "log", Value: strings.Repeat("x", 5000), Run: "r1", Step: 4})
	for i := range memory.MaxNotes - 1 {
		evicted, _ := s.Put(ctx, ws, protocol.Note{Key: fmt.Sprintf("n%d", i), Value: "v", Run: "r2", Step: 1})
		if len(evicted) > 0 {
			fmt.Println("evicted", evicted)
		}
	}
	notes, _ := s.List(ctx, ws)
	fmt.Println(len(notes), "notes, oldest", notes[0].Key)
	fmt.Println(memory.Identity(ws))
	// Output:
	// evicted [test]
	// 64 notes, oldest log
	// root:/srv/checkout
}
