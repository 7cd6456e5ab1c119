package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// handleDecide records a decision sent as a plain NATS request.
func (c *Coordinator) handleDecide(ctx context.Context, r micro.Request) {
	type answer struct {
		Approval *protocol.Approval `json:"approval,omitempty"`
		Error    *protocol.Error    `json:"error,omitempty"`
	}
	id := strings.TrimPrefix(r.Subject(), wire.DecidePrefix)
	if _, _, _, err := protocol.ParseApprovalID(id); err != nil {
		respondJSON(r, answer{Error: protocol.AsError(err)}, protocol.AsError(err))
		return
	}
	var d protocol.Decision
	dec := json.NewDecoder(bytes.NewReader(r.Data()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		e := protocol.FieldError(protocol.CodeMalformed, "", `send a decision such as {"approve": true} or {"approve": false, "reason": "..."}`,
			"the decision is not valid JSON: %s", err.Error())
		respondJSON(r, answer{Error: e}, e)
		return
	}
	d.By = decider(r.Headers(), d.By)
	ap, err := c.approvals.Decide(ctx, id, &d)
	if err != nil {
		respondJSON(r, answer{Error: protocol.AsError(err)}, protocol.AsError(err))
		return
	}
	c.log.Info("decision recorded", "approval", id, "approve", d.Approve, "by", d.By)
	_ = r.RespondJSON(answer{Approval: ap})
}

// handleResume carries a run on at a client's request: the package's
// Resume for a cluster rather than for the process it runs in.
func (c *Coordinator) handleResume(ctx context.Context, r micro.Request) {
	reply := func(e *protocol.Error) { respondJSON(r, protocol.ResumeReply{Coordinator: c.cfg.ID, Error: e}, e) }
	run := strings.TrimPrefix(r.Subject(), wire.ResumePrefix)
	if !protocol.ValidToken(run) {
		reply(protocol.Errorf(protocol.CodeUnknownRun, "%q is not a run id", run))
		return
	}
	var req protocol.ResumeRequest
	if len(bytes.TrimSpace(r.Data())) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.Data()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			reply(protocol.FieldError(protocol.CodeMalformed, "", `send {} to keep the stored policy, or {"policy": {...}}`,
				"the resume request is not valid JSON: %s", err.Error()))
			return
		}
	}
	since := time.Now().UTC()
	err := c.ResumeWith(ctx, run, req.Policy)
	ans := protocol.ResumeReply{Coordinator: c.cfg.ID}
	switch {
	case errors.Is(err, errNoRoom):
		ans.Error = protocol.Errorf(protocol.CodeUnavailable, "coordinator %s has no room for another run; ask again", c.cfg.ID)
	case err != nil:
		ans.Error = protocol.AsError(err)
	default:
		ans.Since = since
		c.log.Info("run resumed at a client's request", "run", run, "policy", req.Policy != nil)
	}
	respondJSON(r, ans, ans.Error)
}

// respondJSON answers a micro request with v; with e set, as a service
// error (Nats-Service-Error headers, the same JSON as the body), so `nats
// micro stats` counts it among the endpoint's errors.
func respondJSON(r micro.Request, v any, e *protocol.Error) {
	if e == nil {
		_ = r.RespondJSON(v)
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	_ = r.Error(strconv.Itoa(int(e.Code)), e.Message, data)
}

// decider names who sent a decision over NATS: the user of the connection
// when the server says it (the request info header a server adds to a
// request crossing an account's service import, which the sender cannot
// set: the server replaces it), else what the decider stated, else "nats".
// Within one account the header is the sender's own; the name is then
// only as good as the decider's word, like a stated one.
func decider(h micro.Headers, stated string) string {
	var info struct {
		Account string `json:"acc"`
		User    string `json:"user"`
	}
	if raw := h.Get(requestInfoHeader); raw != "" && json.Unmarshal([]byte(raw), &info) == nil && info.User != "" {
		if info.Account != "" {
			return "nats:" + info.User + "@" + info.Account
		}
		return "nats:" + info.User
	}
	return cmp.Or(strings.TrimSpace(stated), "nats")
}

// requestInfoHeader is the header a NATS server adds to a request that
// crosses a service import, with the requester's connection.
const requestInfoHeader = "Nats-Request-Info"

func (c *Coordinator) handleStatus(req micro.Request) {
	c.mu.Lock()
	runs := make([]string, 0, len(c.active))
	for r := range c.active {
		runs = append(runs, r)
	}
	c.mu.Unlock()
	_ = req.RespondJSON(map[string]any{"id": c.cfg.ID, "runs": runs, "max_runs": c.cfg.MaxRuns})
}
