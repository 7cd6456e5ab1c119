package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/coordinator"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
	"github.com/ioharness/harness/pkg/worker"
)

// TestStepTasksPutTogetherAreTheRequestsAssembled runs two runs of eight
// steps, one served by the embedded worker (which keeps each run's last
// request, so its tasks are put together from what it kept) and one by a
// worker that keeps none (so it asks the coordinator for each extending
// task's request whole). Every request a provider was sent is the one the
// assembly rebuilds from the run's trace, byte for byte, and the tasks on
// the bus after the first carried only part of it.
func TestStepTasksPutTogetherAreTheRequestsAssembled(t *testing.T) {
	ws := t.TempDir()
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("line of f%d <&> ü\n", i), 40)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	sent := map[string][]string{} // run -> each request's JSON, by step
	agent := func(req *protocol.CompletionRequest, _ int) (*protocol.Turn, error) {
		b, _ := json.Marshal(req)
		steps := 0 // the turns the request carries so far
		for _, m := range req.Messages {
			if m.Role == protocol.RoleAssistant {
				steps++
			}
		}
		run := "kept" // the task names the run
		if strings.Contains(req.Messages[0].Content, "Run asked.") {
			run = "asked"
		}
		mu.Lock()
		sent[run] = append(sent[run], string(b))
		mu.Unlock()
		if steps == 7 {
			return &protocol.Turn{Text: "Done.", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
		}
		args := fmt.Sprintf(`{"path":"f%d.txt"}`, steps)
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("c%d", steps), Name: "read_file", Arguments: json.RawMessage(args)}},
			Usage: protocol.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: provider.NewScriptedFunc(agent)})
	nc := testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials()))
	var tasks []protocol.StepTask
	if _, err := nc.Subscribe(wire.StepsPrefix+">", func(m *nats.Msg) {
		var task protocol.StepTask
		if json.Unmarshal(m.Data, &task) == nil {
			mu.Lock()
			tasks = append(tasks, task)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	wk, err := worker.New(testkit.Conn(t, cl.Server(), nats.UserInfo(cl.Credentials())), provider.NewScriptedFunc(agent),
		worker.Config{ID: "keeps-none", Pools: []string{"asking"}, TranscriptBytes: -1, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = wk.Run(wctx) }()
	defer func() { stop(); <-done }()
	<-wk.Ready()

	for _, run := range []string{"kept", "asked"} {
		c := sayDone(ws)
		c.Task, c.Budget.MaxSteps = "Run "+run+".", 10
		if run == "asked" {
			c.Provider.Pool = "asking"
		}
		h, err := cl.Submit(t.Context(), c, harness.WithRunID(run))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		res, err := h.Wait(ctx)
		cancel()
		if err != nil || res.Outcome != protocol.OutcomeFinished || res.Steps != 8 {
			t.Fatalf("run %s: %+v, %v; want it finished in 8 steps", run, res, err)
		}
		recs, err := cl.Run(run).Trace(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := sent[run]
		mu.Unlock()
		if len(got) != 8 {
			t.Fatalf("run %s: the provider was sent %d requests, want 8", run, len(got))
		}
		for step := 1; step <= 8; step++ {
			want, _, err := coordinator.Request(run, recs, step)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := json.Marshal(want)
			if got[step-1] != string(w) {
				t.Fatalf("run %s step %d: the provider was sent\n%s\nthe assembly rebuilds\n%s", run, step, got[step-1], w)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	extending := map[string]int{}
	for _, task := range tasks {
		if task.Base != nil && task.Base.Messages > 0 && task.Base.Frame {
			extending[task.Run]++
		}
	}
	if extending["kept"] < 7 || extending["asked"] < 7 {
		t.Errorf("tasks extending the one before, by run: %v; want 7 of each run's 8", extending)
	}
	if n := basesFound(t, reg, "asked"); n < 7 {
		t.Errorf("the worker that keeps none asked for %v tasks whole, want 7", n)
	}
}

// basesFound is the worker's count of extending tasks whose request
// whole was found one way.
func basesFound(t *testing.T, reg *prometheus.Registry, found string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "harness_worker_task_bases_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "found" && l.GetValue() == found {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no harness_worker_task_bases_total{found=%q}", found)
	return 0
}
