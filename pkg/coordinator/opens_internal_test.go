package coordinator

import (
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// TestRootOpensForgetThoseWhoseTimeIsUp: the opens whose answers are
// heard are forgotten once their time is up, when a later open comes a
// second or more after the last look, and not before.
func TestRootOpensForgetThoseWhoseTimeIsUp(t *testing.T) {
	ro := rootOpens{open: map[string]*rootOpen{}}
	ro.add("old", &rootOpen{until: time.Now().Add(-time.Minute)})
	ro.add("live", &rootOpen{until: time.Now().Add(time.Minute)})
	if _, ok := ro.open["old"]; !ok {
		t.Fatal("an open was forgotten by a look made less than a second after the last")
	}
	ro.swept = time.Now().Add(-2 * time.Second)
	ro.add("new", &rootOpen{until: time.Now().Add(time.Minute)})
	if _, ok := ro.open["old"]; ok {
		t.Error("an open whose time is up was kept")
	}
	for _, token := range []string{"live", "new"} {
		if _, ok := ro.open[token]; !ok {
			t.Errorf("the open %s, whose time is not up, was forgotten", token)
		}
	}
}

// openRig is a coordinator that only opens roots, on a server of its
// own, and a sandboxer's subjects the test answers on.
func openRig(t *testing.T) (*Coordinator, *nats.Conn) {
	t.Helper()
	nc := testkit.Conn(t, testkit.NATS(t))
	c := &Coordinator{nc: nc, cfg: Config{OpenTimeout: time.Minute}, log: slog.New(slog.DiscardHandler),
		opens: rootOpens{prefix: nc.NewInbox() + ".", open: map[string]*rootOpen{}}}
	sub, err := nc.Subscribe(c.opens.prefix+"*", c.heardOpen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c, nc
}

// closesTo hears the ops sent to node and answers each.
func closesTo(t *testing.T, nc *nats.Conn, node string) chan *protocol.SandboxOp {
	t.Helper()
	ops := make(chan *protocol.SandboxOp, 8)
	if _, err := nc.Subscribe(wire.SandboxOps(node), func(m *nats.Msg) {
		var op protocol.SandboxOp
		if json.Unmarshal(m.Data, &op) == nil {
			ops <- &op
		}
		_ = m.Respond([]byte(`{"op_id":"` + op.OpID + `"}`))
	}); err != nil {
		t.Fatal(err)
	}
	return ops
}

// answer answers an open heard as node, naming its open opened.
func answer(t *testing.T, m *nats.Msg, node string, opened uint64) {
	t.Helper()
	data, _ := json.Marshal(&protocol.SandboxReply{OpID: "r.open", Node: node, Opened: opened})
	if err := m.Respond(data); err != nil {
		t.Fatal(err)
	}
}

// TestAnOpenClosesTheOthersThatOpened: the run goes on with the first
// sandboxer to answer its open; a second that opened the workspace too is
// sent a close naming its open, and the first none.
func TestAnOpenClosesTheOthersThatOpened(t *testing.T) {
	c, nc := openRig(t)
	toFirst, toSecond := closesTo(t, nc, "sb-a"), closesTo(t, nc, "sb-b")
	if _, err := nc.Subscribe(wire.SandboxOpenSubject, func(m *nats.Msg) {
		answer(t, m, "sb-a", 1)
		answer(t, m, "sb-b", 2)
	}); err != nil {
		t.Fatal(err)
	}
	reply, err := c.openRoot(t.Context(), &protocol.SandboxOp{OpID: "r.open", Run: "r", Kind: protocol.OpOpen}, 5*time.Second)
	if err != nil || reply.Node != "sb-a" {
		t.Fatalf("open = %+v, %v; want sb-a's answer", reply, err)
	}
	select {
	case op := <-toSecond:
		if op.Kind != protocol.OpClose || op.Run != "r" || op.Opened != 2 {
			t.Errorf("sent to the second = %+v, want a close of run r naming its open 2", op)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second sandboxer to open the workspace was not told to close it")
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case op := <-toFirst:
		t.Errorf("the sandboxer the run went on with was sent %+v", op)
	default:
	}
}

// TestAnOpenAnsweredTooLateIsClosed: an open that stopped waiting (its
// time for this attempt up) took no answer, so one that comes after is
// closed, whoever sent it.
func TestAnOpenAnsweredTooLateIsClosed(t *testing.T) {
	c, nc := openRig(t)
	toLate := closesTo(t, nc, "sb-late")
	heard := make(chan *nats.Msg, 1)
	if _, err := nc.Subscribe(wire.SandboxOpenSubject, func(m *nats.Msg) { heard <- m }); err != nil {
		t.Fatal(err)
	}
	reply, err := c.openRoot(t.Context(), &protocol.SandboxOp{OpID: "r.open", Run: "r", Kind: protocol.OpOpen}, 50*time.Millisecond)
	if !errors.Is(err, nats.ErrTimeout) || reply != nil {
		t.Fatalf("open answered by nobody = %+v, %v; want a timeout", reply, err)
	}
	answer(t, <-heard, "sb-late", 7)
	select {
	case op := <-toLate:
		if op.Kind != protocol.OpClose || op.Opened != 7 {
			t.Errorf("sent to the late sandboxer = %+v, want a close naming its open 7", op)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a sandboxer that answered after the open stopped waiting was not told to close")
	}
}
