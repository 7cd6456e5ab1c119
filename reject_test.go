package harness_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// TestRejectedContractIsSeen publishes a contract with an unknown field
// the way `nats pub` does, asking for the answer on a subject of the
// operator's own (not an inbox): the answer comes there, an event on
// harness.events.rejected.unknown_field names the message id, and the
// coordinator counts it by code. An answer asked on a subject of harness's
// own is not sent.
func TestRejectedContractIsSeen(t *testing.T) {
	cl := clustertest.Start(t, harness.Config{Roots: []string{t.TempDir()}, Provider: provider.NewScripted(), NoTakeover: true})
	nc := cl.Conn()
	answers, err := nc.SubscribeSync("ci.answers.>")
	if err != nil {
		t.Fatal(err)
	}
	events, err := nc.SubscribeSync(wire.Rejected(">"))
	if err != nil {
		t.Fatal(err)
	}
	stolen, err := nc.SubscribeSync("harness.trace.>")
	if err != nil {
		t.Fatal(err)
	}
	send := func(id, reply string) {
		t.Helper()
		m := nats.NewMsg(wire.SubjectSubmit)
		m.Data = []byte(`{"schema":"harness.contract/v1","task":"x","workspace":{"root":"/tmp"},"verification":{"none":{}},"budgett":{}}`)
		m.Header.Set(nats.MsgIdHdr, id)
		m.Header.Set(wire.HeaderReply, reply)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	send("bad-1", "ci.answers.bad-1")
	m, err := answers.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer on the operator's subject: %v", err)
	}
	var reply protocol.SubmitReply
	if err := json.Unmarshal(m.Data, &reply); err != nil || reply.Error == nil || reply.Error.Code != protocol.CodeUnknownField {
		t.Fatalf("answer = %s, want an unknown_field error", m.Data)
	}
	m, err = events.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no rejected event: %v", err)
	}
	var ev protocol.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil || m.Subject != "harness.events.rejected.unknown_field" || ev.Kind != protocol.EventRejected ||
		ev.Text != "bad-1" || ev.Error == nil || ev.Error.Field == "" {
		t.Fatalf("event on %s = %s, want unknown_field naming bad-1", m.Subject, m.Data)
	}
	send("bad-2", "harness.trace.victim")
	if _, err := events.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no rejected event for the second: %v", err)
	}
	// One publisher's messages reach one connection in order: an answer
	// sent before the event would be queued by now.
	if n, _, _ := stolen.Pending(); n != 0 {
		t.Errorf("%d answer(s) were sent on harness's own subject harness.trace.victim", n)
	}
	if got := counter(t, cl, "harness_coordinator_contracts_rejected_total", "code", "unknown_field"); got != 2 {
		t.Errorf("contracts_rejected_total{code=unknown_field} = %v, want 2", got)
	}
}

// counter reads one labelled counter of the cluster's metrics.
func counter(t *testing.T, cl *harness.Cluster, name, label, value string) float64 {
	t.Helper()
	mfs, err := cl.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabel(m, label, value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestSubmitRequestIsAnswered asks for runs as `nats req harness.submit`
// does: a coordinator, not JetStream, answers, with the run id once the
// run has started, under the message id when there is one (again for a
// duplicate the stream dropped), or with the refusal, counted as the
// micro service's error; an answer asked on harness's own subjects is
// not sent.
func TestSubmitRequestIsAnswered(t *testing.T) {
	ws := t.TempDir()
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: provider.NewScripted(), NoTakeover: true})
	nc := cl.Conn()
	good := []byte(`{"schema":"harness.contract/v1","task":"x","workspace":{"root":"` + ws + `"},"verification":{"none":{}}}`)
	ask := func(body []byte, id string) *nats.Msg {
		t.Helper()
		m := nats.NewMsg(wire.SubjectSubmit)
		m.Data = body
		if id != "" {
			m.Header.Set(nats.MsgIdHdr, id)
		}
		reply, err := nc.RequestMsg(m, 30*time.Second)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		return reply
	}
	runOf := func(m *nats.Msg) string {
		t.Helper()
		var r protocol.SubmitReply
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Error != nil || r.Run == "" {
			t.Fatalf("answer = %s, want a run id", m.Data)
		}
		if _, err := cl.Run(r.Run).Status(t.Context()); err != nil {
			t.Fatalf("answered run %s: %v", r.Run, err)
		}
		return r.Run
	}
	if run := runOf(ask(good, "")); !strings.Contains(run, "-s") {
		t.Errorf("run without a message id = %s, want the time and stream sequence", run)
	}
	if run := runOf(ask(good, "req-1")); run != "req-1" {
		t.Errorf("run = %s, want req-1, the message id", run)
	}
	if run := runOf(ask(good, "req-1")); run != "req-1" {
		t.Errorf("run of the duplicate = %s, want req-1", run)
	}
	m := ask([]byte(`{"schema":"harness.contract/v1","task":"x","tusk":1}`), "")
	var r protocol.SubmitReply
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Error == nil || r.Error.Code != protocol.CodeUnknownField {
		t.Fatalf("answer = %s, want an unknown_field error", m.Data)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != strconv.Itoa(int(protocol.CodeUnknownField)) {
		t.Errorf("service error code = %q, want %d", code, protocol.CodeUnknownField)
	}

	stolen, err := nc.SubscribeSync("harness.trace.victim")
	if err != nil {
		t.Fatal(err)
	}
	events, err := nc.SubscribeSync(wire.Rejected(">"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(wire.SubjectSubmit, "harness.trace.victim", []byte(`{"tusk":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := events.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no rejected event: %v", err)
	}
	if n, _, _ := stolen.Pending(); n != 0 {
		t.Errorf("%d answer(s) were sent on harness's own subject harness.trace.victim", n)
	}
}
