package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

func natsInProcess(srv *server.Server) nats.Option { return nats.InProcessServer(srv) }

// TestBadContractsOnSubmit publishes malformed contracts on harness.submit
// the way `nats pub` does, and checks each is answered with its coded error
// while the coordinator keeps serving: a good contract after them runs.
func TestBadContractsOnSubmit(t *testing.T) {
	ws := clustertest.ExampleWorkspace(t)
	cl, err := harness.Start(t.Context(), harness.Config{AllowFloor: true, DataDir: t.TempDir(), Listen: "127.0.0.1:0", Roots: []string{ws},
		Provider: provider.NewScripted(&protocol.Turn{Text: "nothing to do"})})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	nc, err := nats.Connect(cl.URL(), nats.UserInfo(cl.Credentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	good := `{"schema":"harness.contract/v1","task":"say done","workspace":{"root":"` + ws + `"},"verification":{"none":{}}}`
	tests := []struct {
		name      string
		body      string
		want      *protocol.Error
		wantField string
	}{
		{"not json", `{"schema":`, protocol.ErrMalformed, ""},
		{"not an object", `[1,2]`, protocol.ErrMalformed, ""},
		{"unknown top-level field", strings.Replace(good, `"task"`, `"tusk":"x","task"`, 1), protocol.ErrUnknownField, "tusk"},
		{"unknown nested field", strings.Replace(good, `{"none":{}}`, `{"none":{"now":true}}`, 1), protocol.ErrUnknownField, "verification.none.now"},
		{"misspelt budget field", strings.Replace(good, `"task"`, `"budget":{"max_stepz":3},"task"`, 1), protocol.ErrUnknownField, "budget.max_stepz"},
		{"wrong schema", strings.Replace(good, "contract/v1", "contract/v9", 1), protocol.ErrSchemaVersion, "schema"},
		{"no schema", strings.Replace(good, `"schema":"harness.contract/v1",`, "", 1), protocol.ErrMissingField, "schema"},
		{"no task", strings.Replace(good, `"task":"say done"`, `"task":"  "`, 1), protocol.ErrMissingField, "task"},
		{"no workspace", strings.Replace(good, `"workspace":{"root":"`+ws+`"},`, "", 1), protocol.ErrMissingField, "workspace.root"},
		{"no verification", strings.Replace(good, `,"verification":{"none":{}}`, "", 1), protocol.ErrMissingField, "verification"},
		{"two verifications", strings.Replace(good, `{"none":{}}`, `{"none":{},"command":{"argv":["true"]}}`, 1), protocol.ErrInvalidField, "verification"},
		{"wrong type", strings.Replace(good, `"task"`, `"budget":{"max_steps":"many"},"task"`, 1), protocol.ErrInvalidField, "budget.max_steps"},
		{"bad duration", strings.Replace(good, `"task"`, `"budget":{"max_wall":"soon"},"task"`, 1), protocol.ErrInvalidField, "budget.max_wall"},
		{"bad policy effect", strings.Replace(good, `"task"`, `"policy":{"layers":[{"name":"x","rules":[{"act":"read","effect":"maybe","pattern":"*"}]}]},"task"`, 1),
			protocol.ErrInvalidField, "policy.layers[0].rules[0].effect"},
		{"negative cost cap", strings.Replace(good, `"task"`, `"budget":{"max_cost_micros":-1},"task"`, 1), protocol.ErrInvalidField, "budget.max_cost_micros"},
		{"misspelt tree field", strings.Replace(good, `"task"`, `"budget":{"tree":{"max_agent":3}},"task"`, 1), protocol.ErrUnknownField, "budget.tree.max_agent"},
		{"negative tree cap", strings.Replace(good, `"task"`, `"budget":{"tree":{"max_depth":-2}},"task"`, 1), protocol.ErrInvalidField, "budget.tree.max_depth"},
		{"sub-agent with a ceiling", strings.Replace(good, `"task"`, `"parent":"r1","budget":{"tree":{"max_steps":99}},"task"`, 1), protocol.ErrInvalidField, "budget.tree"},
		{"parent not a run id", strings.Replace(good, `"task"`, `"parent":"a.b","task"`, 1), protocol.ErrInvalidField, "parent"},
		{"unknown parent", strings.Replace(good, `"task"`, `"parent":"nobody","task"`, 1), protocol.ErrUnknownRun, "parent"},
		{"a tool named twice", strings.Replace(good, `"task"`, `"tools":["word_count","word_count"],"task"`, 1), protocol.ErrInvalidField, "tools[1]"},
		{"a tool name with a space", strings.Replace(good, `"task"`, `"tools":["word count"],"task"`, 1), protocol.ErrInvalidField, "tools[0]"},
		{"an MCP tool named", strings.Replace(good, `"task"`, `"tools":["mcp__gh__x"],"task"`, 1), protocol.ErrInvalidField, "tools[0]"},
		{"the harness's own tool named", strings.Replace(good, `"task"`, `"tools":["spawn_agent"],"task"`, 1), protocol.ErrInvalidField, "tools[0]"},
		{"oversize", strings.Replace(good, "say done", strings.Repeat("x", protocol.MaxContractBytes), 1), protocol.ErrTooLarge, ""},
		// The stream drops this one unseen; the coordinators, hearing it
		// published, refuse it.
		{"over the stream's limit", strings.Replace(good, "say done", strings.Repeat("x", wire.MaxSubmitBytes), 1), protocol.ErrTooLarge, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inbox := nats.NewInbox()
			sub, err := nc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			msg := &nats.Msg{Subject: "harness.submit", Data: []byte(tt.body), Header: nats.Header{"Harness-Reply": []string{inbox}}}
			if err := nc.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			var reply protocol.SubmitReply
			if err := json.Unmarshal(m.Data, &reply); err != nil {
				t.Fatal(err)
			}
			if reply.Error == nil || !errors.Is(reply.Error, tt.want) {
				t.Fatalf("reply = %+v, want error %v", reply, tt.want.Code)
			}
			if reply.Error.Field != tt.wantField {
				t.Errorf("error field = %q, want %q", reply.Error.Field, tt.wantField)
			}
			if reply.Error.Message == "" || (reply.Error.Hint == "" && tt.want != protocol.ErrMalformed) {
				t.Errorf("error %+v lacks a message or a hint", reply.Error)
			}
		})
	}
	// The coordinator is still serving.
	res, err := clustertest.RunJSON(t.Context(), cl, []byte(good), "after-bad-input")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished {
		t.Fatalf("good contract after bad ones = %s (%s), want finished", res.Outcome, res.Reason)
	}
}

// TestSubmitWithNothingToTakeIt submits to a server where nothing takes
// contracts (no coordinator, and the submit stream gone): the client is
// told so at once, with what to do, rather than waiting out its context.
func TestSubmitWithNothingToTakeIt(t *testing.T) {
	nc := testkit.Conn(t, testkit.NATS(t))
	c, err := harness.NewClient(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.JetStream().DeleteStream(t.Context(), wire.StreamSubmit); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ct := &protocol.Contract{Schema: protocol.ContractSchema, Task: "say done", Workspace: protocol.Workspace{Root: t.TempDir()},
		Verification: protocol.Verification{None: &struct{}{}}}
	_, err = c.Submit(ctx, ct)
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "harness up") || ctx.Err() != nil {
		t.Fatalf("Submit with nothing to take it = %v (waited out: %v), want unavailable at once, saying to start the cluster", err, ctx.Err())
	}
}

// TestSubmitEndsWithItsConnection closes the client's connection while a
// submission waits for a coordinator that is not there: the submission
// ends at once saying the connection closed, not after its wait to submit
// again (30 s), nor at its context's end.
func TestSubmitEndsWithItsConnection(t *testing.T) {
	srv := testkit.NATS(t)
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	c, err := harness.NewClient(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ct := &protocol.Contract{Schema: protocol.ContractSchema, Task: "say done", Workspace: protocol.Workspace{Root: t.TempDir()},
		Verification: protocol.Verification{None: &struct{}{}}}
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, ct)
		done <- err
	}()
	// The contract is stored: the submission is waiting for its answer.
	testkit.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		s, err := c.JetStream().Stream(ctx, wire.StreamSubmit)
		if err != nil {
			return err
		}
		if s.CachedInfo().State.Msgs == 0 {
			return errors.New("the contract is not stored yet")
		}
		return nil
	})
	nc.Close()
	if err := <-done; !errors.Is(err, nats.ErrConnectionClosed) || !strings.Contains(err.Error(), "harness status") {
		t.Fatalf("Submit whose connection closed = %v, want the connection closed, and how to look for the run", err)
	}
}
