package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// maxRows bounds the runs one page lists, newest first.
const maxRows = 500

// Row is one run in the runs list.
type Row struct {
	ID, Status, Outcome, Pool, Tenant, Owner, Task, Parent string
	Steps                                                  int
	Tokens                                                 int64
	Cost                                                   string
	Age                                                    string
	Search                                                 string // what the search box matches: id and task, lower case
}

func rowOf(st *protocol.RunState, now time.Time) Row {
	r := Row{ID: st.Run, Status: string(st.Status), Outcome: string(st.Outcome), Pool: cmp.Or(st.Pool, "default"), Tenant: st.Tenant,
		Owner: st.Coordinator, Parent: st.Parent, Steps: st.Step, Tokens: st.Tokens, Age: age(now.Sub(st.Started))}
	r.Task, _ = cut(oneLine(st.Task, 160))
	r.Cost = "—"
	if st.CostMicros > 0 {
		r.Cost = costOf(st.CostMicros, true)
	}
	r.Search = strings.ToLower(st.Run + " " + st.Task)
	return r
}

// states are the states the runs list filters by.
var states = []string{string(protocol.StatusRunning), string(protocol.StatusPaused), string(protocol.StatusCompleted), string(protocol.StatusFailed)}

// runsView is the runs page.
type runsView struct {
	State, Query string
	States       []string
	Rows         []Row
	Total        int
	Err          string
}

func (s *Server) runsView(ctx context.Context, state, q string) runsView {
	v := runsView{State: state, Query: q, States: states}
	all, err := s.cfg.Client.Runs(ctx)
	if err != nil {
		v.Err = "the run index could not be read: " + err.Error()
		return v
	}
	v.Total = len(all)
	slices.SortFunc(all, func(a, b protocol.RunState) int { return b.Started.Compare(a.Started) })
	lq := strings.ToLower(strings.TrimSpace(q))
	now := s.now()
	for i := range all {
		st := &all[i]
		if state != "" && string(st.Status) != state {
			continue
		}
		row := rowOf(st, now)
		if lq != "" && !strings.Contains(row.Search, lq) {
			continue
		}
		v.Rows = append(v.Rows, row)
		if len(v.Rows) == maxRows {
			break
		}
	}
	return v
}

// Node is a run of an agent tree, with its sub-agents.
type Node struct {
	Row
	Current  bool
	Children []*Node
}

// runView is a run's page.
type runView struct {
	Row
	State     *protocol.RunState
	Reason    string
	Story     *Story
	Tree      *Node
	Finished  bool
	CanCancel bool
	Note      string
	Err       string
}

func (s *Server) runView(ctx context.Context, id string, v *viewer) (*runView, error) {
	h := s.cfg.Client.Run(id)
	st, err := h.Status(ctx)
	if err != nil {
		return nil, err
	}
	rv := &runView{Row: rowOf(st, s.now()), State: st, Reason: st.Reason}
	rv.Finished = st.Status == protocol.StatusCompleted || st.Status == protocol.StatusFailed
	rv.CanCancel = !rv.Finished && v.P.CanDecide()
	recs, err := h.Trace(ctx)
	if err != nil {
		rv.Err = "the trace could not be read: " + err.Error()
		rv.Story = &Story{Run: id}
	} else {
		rv.Story = BuildStory(id, recs)
		// The trace is the truth and the index its cache, written a moment
		// after the finished record whose event woke this page.
		if last := recs[len(recs)-1]; last.Kind == protocol.RecordFinished && !rv.Finished {
			rv.Finished, rv.CanCancel = true, false
			rv.Status, rv.Outcome, rv.Reason = string(protocol.StatusOf(last.Outcome)), string(last.Outcome), last.Reason
		}
	}
	rv.Story.Entries = mergeLive(rv.Story.Entries, s.hub.notesOf(id))
	// The tree is read from the whole index: only for a run that is in
	// one, a sub-agent or a run that spawned.
	if st.Parent != "" || rv.Story.spawned() {
		if all, err := s.cfg.Client.Runs(ctx); err == nil {
			rv.Tree = treeOf(all, st, s.now())
		}
	}
	return rv, nil
}

// treeOf builds the agent tree run belongs to, from the run index.
func treeOf(all []protocol.RunState, run *protocol.RunState, now time.Time) *Node {
	root := cmp.Or(run.Tree, run.Run)
	nodes := map[string]*Node{}
	for i := range all {
		st := &all[i]
		if cmp.Or(st.Tree, st.Run) == root {
			nodes[st.Run] = &Node{Row: rowOf(st, now), Current: st.Run == run.Run}
		}
	}
	var top *Node
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		n := nodes[id]
		if p := nodes[n.Parent]; p != nil && n.Parent != "" {
			p.Children = append(p.Children, n)
		} else if id == root || top == nil {
			top = n
		}
	}
	if top == nil || (len(top.Children) == 0 && top.Current) {
		return nil // a run on its own has no tree to show
	}
	return top
}

// mergeLive puts the live notes among the trace's entries by time.
func mergeLive(entries, live []Entry) []Entry {
	if len(live) == 0 {
		return entries
	}
	out := append(append([]Entry(nil), entries...), live...)
	slices.SortStableFunc(out, func(a, b Entry) int { return a.Time.Compare(b.Time) })
	return out
}

// requestView is what the model was sent at one step.
type requestView struct {
	Run       string
	Step      int
	System    string
	Messages  []messageView
	Tools     []string
	Assembly  *protocol.Assembly
	SystemCut int
}

type messageView struct {
	Role, Content, ToolCallID string
	Cut                       int
	Calls                     []string
	Images                    int
	Thinking                  int
}

func requestViewOf(run string, step int, req *protocol.CompletionRequest, asm *protocol.Assembly) *requestView {
	v := &requestView{Run: run, Step: step, Assembly: asm}
	v.System, v.SystemCut = cut(req.System)
	for _, t := range req.Tools {
		v.Tools = append(v.Tools, t.Name)
	}
	for _, m := range req.Messages {
		mv := messageView{Role: m.Role, ToolCallID: m.ToolCallID, Images: len(m.Images), Thinking: len(m.Thinking)}
		mv.Content, mv.Cut = cut(m.Content)
		for _, tc := range m.ToolCalls {
			a, _ := cut(string(tc.Arguments))
			mv.Calls = append(mv.Calls, tc.Name+" "+a)
		}
		v.Messages = append(v.Messages, mv)
	}
	return v
}

// approvalView is one pending action.
type approvalView struct {
	ID, Run, Tool, Act, Target, Shown, Rule, Layer, Arguments string
	Step, Call                                                int
	Age                                                       string
	Diff                                                      []DiffLine
}

type approvalsView struct {
	Pending []approvalView
	Note    string
	Err     string
}

func (s *Server) approvalsView(ctx context.Context) approvalsView {
	var v approvalsView
	aps, err := s.cfg.Client.Pending(ctx)
	if err != nil {
		v.Err = "the approvals could not be read: " + err.Error()
		return v
	}
	for _, ap := range aps {
		p := ap.Pending
		av := approvalView{ID: ap.ID, Run: p.Run, Tool: p.Tool, Act: p.Act, Target: p.Target, Rule: cmp.Or(p.Rule, "the default for "+p.Act),
			Layer: p.Layer, Step: p.Step, Call: p.Call, Age: age(s.now().Sub(p.Time))}
		av.Shown, _ = cut(p.Shown)
		if len(p.Arguments) > 0 {
			av.Arguments, _ = cut(pretty(p.Arguments))
			av.Diff = diffOf(&protocol.ToolCall{Name: p.Tool, Arguments: p.Arguments})
		}
		v.Pending = append(v.Pending, av)
	}
	return v
}

// decideOverNATS records a decision as a plain NATS request on
// harness.decide.<id>, which a coordinator checks and records: the
// console's user may publish there and write no bucket itself.
func decideOverNATS(ctx context.Context, c *harness.Client, id string, d *protocol.Decision) (*protocol.Approval, error) {
	if _, _, _, err := protocol.ParseApprovalID(id); err != nil {
		return nil, err
	}
	body, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	m, err := c.Conn().RequestWithContext(ctx, wire.DecidePrefix+id, body)
	if err != nil {
		if strings.Contains(err.Error(), "no responders") {
			return nil, protocol.Errorf(protocol.CodeUnavailable, "no coordinator is running to record the decision; start one and decide again")
		}
		return nil, fmt.Errorf("decide %s: %w", id, err)
	}
	var answer struct {
		Approval *protocol.Approval `json:"approval"`
		Error    *protocol.Error    `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &answer); err != nil {
		return nil, fmt.Errorf("undecodable answer from the coordinator: %w", err)
	}
	if answer.Error != nil {
		return nil, answer.Error
	}
	return answer.Approval, nil
}

// Instance is one role process on the fleet page.
type Instance struct {
	Service, Role, ID, Version string
	InFlight                   string
	Served, Errors             int
	Detail                     string // pools and provider, backends and tools
	Draining                   bool
	Up                         string
}

// Pool is one worker pool's queue.
type Pool struct {
	Name             string
	Waiting, InHand  uint64
	Redelivered      int
	Running, Pending int // runs of the index in that pool
}

type fleetView struct {
	Instances []Instance
	Pools     []Pool
	Chart     *Chart
	Errs      []string
}

func (s *Server) fleetView(ctx context.Context) fleetView {
	var v fleetView
	c := s.cfg.Client
	fleet, err := c.Fleet(ctx, s.cfg.FleetWait)
	if err != nil {
		v.Errs = append(v.Errs, "the fleet did not answer: "+err.Error())
	}
	stats := s.stats(ctx)
	for _, in := range fleet {
		iv := Instance{Service: in.Service, Role: strings.TrimPrefix(in.Service, "harness-"), ID: in.ID, Version: in.Version, InFlight: "—"}
		st := stats[in.Service+"/"+in.ID]
		var data struct {
			InFlight    *int64   `json:"inflight"`
			Served      *int64   `json:"served"`
			Failed      *int64   `json:"failed"`
			Capacity    *int     `json:"capacity"`
			Draining    bool     `json:"draining"`
			Backends    []string `json:"backends"`
			Concurrency int      `json:"concurrency"`
			Workspaces  *int     `json:"workspaces"`
		}
		if st != nil {
			iv.Up = age(s.now().Sub(st.Started))
			for _, ep := range st.Endpoints {
				iv.Served += ep.NumRequests
				iv.Errors += ep.NumErrors
				if len(ep.Data) > 0 && string(ep.Data) != "null" {
					_ = json.Unmarshal(ep.Data, &data)
				}
			}
		}
		if data.InFlight != nil {
			iv.InFlight = fmt.Sprint(*data.InFlight)
			if data.Capacity != nil && *data.Capacity > 0 {
				iv.InFlight += fmt.Sprintf(" of %d", *data.Capacity)
			}
		}
		if data.Served != nil {
			iv.Served = int(*data.Served)
		}
		if data.Failed != nil {
			iv.Errors = int(*data.Failed)
		}
		iv.Draining = data.Draining
		// Only the metadata that says what an instance serves is shown:
		// never a path or a setting an operator did not mean to publish.
		switch in.Service {
		case "harness-worker":
			iv.Detail = fmt.Sprintf("pools %s; provider %s", cmp.Or(in.Metadata["pools"], "default"), cmp.Or(in.Metadata["provider"], "?"))
		case "harness-sandboxer":
			iv.Detail = "backends " + cmp.Or(in.Metadata["backends"], "none")
			if t := in.Metadata["tools"]; t != "" {
				iv.Detail += "; tools " + t
			}
			if data.Workspaces != nil {
				iv.Detail += fmt.Sprintf("; %d workspaces open", *data.Workspaces)
			}
		case "harness-coordinator":
			if runs, max, ok := s.coordinatorRuns(ctx, in.ID); ok {
				iv.InFlight = fmt.Sprintf("%d runs", runs)
				if max > 0 {
					iv.InFlight = fmt.Sprintf("%d of %d runs", runs, max)
				}
			}
		}
		v.Instances = append(v.Instances, iv)
	}
	slices.SortFunc(v.Instances, func(a, b Instance) int { return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.ID, b.ID)) })
	runs, err := c.Runs(ctx)
	if err != nil {
		v.Errs = append(v.Errs, "the run index could not be read: "+err.Error())
	}
	pools, err := queues(ctx, c.JetStream())
	if err != nil {
		v.Errs = append(v.Errs, "the steps stream's queues could not be read: "+err.Error())
	}
	byName := map[string]*Pool{}
	for i := range pools {
		byName[pools[i].Name] = &pools[i]
	}
	for _, st := range runs {
		name := cmp.Or(st.Pool, "default")
		p := byName[name]
		if p == nil {
			pools = append(pools, Pool{Name: name})
			p = &pools[len(pools)-1]
			byName = map[string]*Pool{}
			for i := range pools {
				byName[pools[i].Name] = &pools[i]
			}
		}
		switch st.Status {
		case protocol.StatusRunning:
			p.Running++
		case protocol.StatusPaused:
			p.Pending++
		}
	}
	slices.SortFunc(pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
	v.Pools = pools
	v.Chart = chartOf(runs, s.now())
	return v
}

// stats asks every instance of the three services for its micro stats,
// by service and id.
func (s *Server) stats(ctx context.Context) map[string]*micro.Stats {
	out := map[string]*micro.Stats{}
	nc := s.cfg.Client.Conn()
	for _, svc := range []string{"harness-coordinator", "harness-worker", "harness-sandboxer"} {
		subj, err := micro.ControlSubject(micro.StatsVerb, svc, "")
		if err != nil {
			continue
		}
		_ = streams.Gather(ctx, nc, subj, s.cfg.FleetWait, func(m *nats.Msg) bool {
			var st micro.Stats
			if json.Unmarshal(m.Data, &st) == nil {
				out[svc+"/"+st.Metadata["id"]] = &st
				if st.Metadata["id"] == "" {
					out[svc+"/"+st.ID] = &st
				}
			}
			return false
		})
	}
	return out
}

// coordinatorRuns asks a coordinator how many runs it has in hand.
func (s *Server) coordinatorRuns(ctx context.Context, id string) (runs, max int, ok bool) {
	if id == "" || !protocol.ValidToken(id) {
		return 0, 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FleetWait)
	defer cancel()
	m, err := s.cfg.Client.Conn().RequestWithContext(ctx, wire.CoordinatorStatus(id), nil)
	if err != nil {
		return 0, 0, false
	}
	var st struct {
		Runs    []string `json:"runs"`
		MaxRuns int      `json:"max_runs"`
	}
	if json.Unmarshal(m.Data, &st) != nil {
		return 0, 0, false
	}
	return len(st.Runs), st.MaxRuns, true
}

// queues reads each pool's consumer of the steps stream: the step tasks
// waiting for a worker, and those in workers' hands.
func queues(ctx context.Context, js jetstream.JetStream) ([]Pool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, wire.StreamSteps)
	if err != nil {
		return nil, err
	}
	var out []Pool
	lister := stream.ListConsumers(ctx)
	for ci := range lister.Info() {
		name, ok := strings.CutPrefix(ci.Name, "workers-")
		if !ok {
			continue
		}
		out = append(out, Pool{Name: name, Waiting: ci.NumPending, InHand: uint64(ci.NumAckPending), Redelivered: ci.NumRedelivered})
	}
	return out, lister.Err()
}

// Chart is tokens and cost over the last day, by hour, as an inline SVG
// bar chart (tokens) with a line (cost).
type Chart struct {
	Bars                    []Bar
	CostLine                string // polyline points
	MaxTokens               int64
	MaxCost                 string
	Tokens                  int64
	Cost                    string
	Width, Height, Baseline int
	From, To                string
}

// Bar is one hour of the chart.
type Bar struct {
	X, Y, W, H int
	Label      string
}

// chartHours is how many hours the chart covers.
const chartHours = 24

// chartOf sums the runs' tokens and cost by the hour each run last
// moved in. The run index keeps totals, not their history, so a long run
// counts whole in its last hour: the chart shows where the spending was
// settled, which over a day is where it went.
func chartOf(runs []protocol.RunState, now time.Time) *Chart {
	const w, h, top = 480, 140, 10
	c := &Chart{Width: w, Height: h, Baseline: h - 20}
	end := now.Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-chartHours * time.Hour)
	tokens := make([]int64, chartHours)
	costs := make([]int64, chartHours)
	var costSum int64
	for _, st := range runs {
		if st.Updated.Before(start) || !st.Updated.Before(end) {
			continue
		}
		i := int(st.Updated.Sub(start) / time.Hour)
		tokens[i] += st.Tokens
		costs[i] += st.CostMicros
		c.Tokens += st.Tokens
		costSum += st.CostMicros
	}
	c.Cost = costOf(costSum, true)
	c.MaxTokens = slices.Max(tokens)
	maxCost := slices.Max(costs)
	c.MaxCost = costOf(maxCost, true)
	slot := w / chartHours
	span := c.Baseline - top
	var pts []string
	for i := range chartHours {
		bh := 0
		if c.MaxTokens > 0 {
			bh = int(int64(span) * tokens[i] / c.MaxTokens)
		}
		label := start.Add(time.Duration(i) * time.Hour).Format("15:04")
		c.Bars = append(c.Bars, Bar{X: i*slot + 2, Y: c.Baseline - bh, W: slot - 4, H: bh, Label: fmt.Sprintf("%s: %d tokens, cost %s", label, tokens[i], costOf(costs[i], true))})
		y := c.Baseline
		if maxCost > 0 {
			y = c.Baseline - int(int64(span)*costs[i]/maxCost)
		}
		pts = append(pts, fmt.Sprintf("%d,%d", i*slot+slot/2, y))
	}
	c.CostLine = strings.Join(pts, " ")
	c.From, c.To = start.Format("Jan 2 15:04"), end.Format("15:04")
	return c
}

func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		i := n
		for i > 0 && !utf8Start(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}
