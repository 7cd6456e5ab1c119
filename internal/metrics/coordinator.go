package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/pkg/protocol"
)

// Results of a ledger draw, the values LedgerDraw counts.
const (
	DrawReserved = "reserved" // an estimate reserved before a provider call
	DrawSettled  = "settled"  // a reservation settled with the real usage
	DrawReleased = "released" // a reservation given back unused
	DrawRefused  = "refused"  // no room left in a budget
	DrawFailed   = "failed"   // the ledger could not be reached or answered an error
)

// Budgets a draw can be refused by, the values LedgerRefusal counts.
const (
	BudgetTokens = "tokens"
	BudgetCost   = "cost"
	BudgetSteps  = "steps"
	BudgetWall   = "wall"
	BudgetAgents = "agents"
	BudgetDepth  = "depth"
)

var outcomes = []string{
	string(protocol.OutcomeSuccess), string(protocol.OutcomeFinished), string(protocol.OutcomeStepCapReached),
	string(protocol.OutcomeTimeBudgetExceeded), string(protocol.OutcomeCostBudgetExceeded), string(protocol.OutcomeDenied),
	string(protocol.OutcomeAwaitingApproval), string(protocol.OutcomeStalled), string(protocol.OutcomeEscalatedRetryable),
	string(protocol.OutcomeEscalatedTerminal), string(protocol.OutcomeBudgetCeilingReached), string(protocol.OutcomeRefused),
	string(protocol.OutcomeCancelled), string(protocol.OutcomeFailed), string(protocol.OutcomeModelRefused),
}

var (
	drawResults = []string{DrawReserved, DrawSettled, DrawReleased, DrawRefused, DrawFailed}
	budgets     = []string{BudgetTokens, BudgetCost, BudgetSteps, BudgetWall, BudgetAgents, BudgetDepth}
)

// Coordinator holds a coordinator's metrics. A nil *Coordinator counts
// nothing.
type Coordinator struct {
	runsStarted    prometheus.Counter
	runsFinished   *prometheus.CounterVec
	steps          prometheus.Counter
	stepSeconds    prometheus.Histogram
	ledgerDraws    *prometheus.CounterVec
	ledgerRefusals *prometheus.CounterVec
	rejected       *prometheus.CounterVec
	active         prometheus.Gauge
	waiting        prometheus.Gauge
	takeovers      prometheus.Counter
	retries        prometheus.Counter
	tokens         *prometheus.CounterVec
	cost           prometheus.Counter
}

// NewCoordinator returns a coordinator's metrics, registered on reg (nil:
// kept, not registered). Every label value starts at zero, so a scrape
// shows each series before it first moves.
func NewCoordinator(reg prometheus.Registerer) *Coordinator {
	m := &Coordinator{
		runsStarted: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "runs_started_total", Help: "Runs this coordinator accepted and started."})),
		runsFinished: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "runs_finished_total", Help: "Runs that reached an outcome on this coordinator, by outcome."}, []string{"outcome"})),
		steps: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "steps_total", Help: "Steps committed to the trace."})),
		stepSeconds: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "step_duration_seconds", Help: "Time from a step's start (its provider call) to its commit.", Buckets: latency})),
		ledgerDraws: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "ledger_draws_total", Help: "Draws on the budget ledger, by result."}, []string{"result"})),
		ledgerRefusals: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "ledger_refusals_total", Help: "Draws the ledger refused, by the budget that had no room."}, []string{"budget"})),
		rejected: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "contracts_rejected_total", Help: "Submitted contracts this coordinator refused, by the error's code."}, []string{"code"})),
		active: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "runs_active", Help: "Runs this coordinator is working on now, each in a run slot (a run waiting on a model, a person or a timer is in none)."})),
		waiting: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "runs_waiting", Help: "Runs in hand here waiting on a provider turn or a retry's delay: no slot, no goroutine."})),
		takeovers: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "takeovers_total", Help: "Runs this coordinator took over after their coordinator was gone."})),
		retries: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "provider_retries_total", Help: "Provider calls made again after a retryable failure."})),
		tokens: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "tokens_total", Help: "Tokens of the provider calls settled on the ledger, by kind."}, []string{"kind"})),
		cost: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "coordinator",
			Name: "cost_micros_total", Help: "Cost of the provider calls settled on the ledger, in micro-units."})),
	}
	m.tokens.WithLabelValues("input")
	m.tokens.WithLabelValues("output")
	for _, o := range outcomes {
		m.runsFinished.WithLabelValues(o)
	}
	for _, r := range drawResults {
		m.ledgerDraws.WithLabelValues(r)
	}
	for _, b := range budgets {
		m.ledgerRefusals.WithLabelValues(b)
	}
	return m
}

// RunStarted counts a run accepted and started.
func (m *Coordinator) RunStarted() {
	if m != nil {
		m.runsStarted.Inc()
	}
}

// RunFinished counts a run that reached its outcome.
func (m *Coordinator) RunFinished(o protocol.Outcome) {
	if m != nil {
		m.runsFinished.WithLabelValues(oneOf(string(o), outcomes...)).Inc()
	}
}

// Step counts a committed step that took d from its start to its commit.
func (m *Coordinator) Step(d time.Duration) {
	if m != nil {
		m.steps.Inc()
		m.stepSeconds.Observe(d.Seconds())
	}
}

// LedgerDraw counts one draw on the budget ledger by its result: one of
// DrawReserved, DrawSettled, DrawReleased, DrawRefused, DrawFailed (any
// other value counts as "other"). A refusal is also counted by
// LedgerRefusal, with the budget that refused it.
func (m *Coordinator) LedgerDraw(result string) {
	if m != nil {
		m.ledgerDraws.WithLabelValues(oneOf(result, drawResults...)).Inc()
	}
}

// LedgerRefusal counts a draw refused for want of room in budget: one of
// BudgetTokens, BudgetCost, BudgetSteps, BudgetWall, BudgetAgents,
// BudgetDepth (any other value counts as "other").
func (m *Coordinator) LedgerRefusal(budget string) {
	if m != nil {
		m.ledgerRefusals.WithLabelValues(oneOf(budget, budgets...)).Inc()
	}
}

// ContractRejected counts a submitted contract refused with the error
// named code.
func (m *Coordinator) ContractRejected(code string) {
	if m == nil {
		return
	}
	m.rejected.WithLabelValues(code).Inc()
}

// Driving counts a run this coordinator begins (+1) or ends (-1) driving.
func (m *Coordinator) Driving(delta int) {
	if m == nil {
		return
	}
	m.active.Add(float64(delta))
}

// Waiting counts a run in hand here that parks (+1) or is woken (-1).
func (m *Coordinator) Waiting(delta int) {
	if m == nil {
		return
	}
	m.waiting.Add(float64(delta))
}

// TakenOver counts a run taken over.
func (m *Coordinator) TakenOver() {
	if m == nil {
		return
	}
	m.takeovers.Inc()
}

// Retried counts a provider call made again.
func (m *Coordinator) Retried() {
	if m == nil {
		return
	}
	m.retries.Inc()
}

// Spent counts what a settled provider call used.
func (m *Coordinator) Spent(input, output, costMicros int64) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues("input").Add(float64(max(input, 0)))
	m.tokens.WithLabelValues("output").Add(float64(max(output, 0)))
	m.cost.Add(float64(max(costMicros, 0)))
}

// ClusterState is what the cluster holds as a whole, read when scraped:
// runs by status, actions waiting for a person, and the step tasks queued
// per worker pool.
type ClusterState struct {
	Runs     map[string]int // by status: running, paused, completed, failed
	Pending  int
	Queued   map[string]uint64 // by pool
	Inflight map[string]int    // step tasks a worker holds, by pool
}

// clusterCollector reports a ClusterState read at each scrape.
type clusterCollector struct {
	read                     func() (ClusterState, error)
	runs, pending, q, flight *prometheus.Desc
}

// RegisterCluster registers on reg the cluster-wide gauges, read by read
// at each scrape: harness_runs{status}, harness_approvals_pending,
// harness_pool_queued{pool} and harness_pool_inflight{pool}. They are the
// same on every coordinator that serves them: take one. A read that fails
// reports nothing for that scrape. A nil reg registers nothing.
func RegisterCluster(reg prometheus.Registerer, read func() (ClusterState, error)) {
	if reg == nil {
		return
	}
	register(reg, prometheus.Collector(&clusterCollector{read: read,
		runs:    prometheus.NewDesc(namespace+"_runs", "Runs in the run index, by status.", []string{"status"}, nil),
		pending: prometheus.NewDesc(namespace+"_approvals_pending", "Actions waiting for a person to decide, of runs not ended.", nil, nil),
		q:       prometheus.NewDesc(namespace+"_pool_queued", "Step tasks waiting for a worker, by pool.", []string{"pool"}, nil),
		flight:  prometheus.NewDesc(namespace+"_pool_inflight", "Step tasks a worker holds and has not acknowledged, by pool.", []string{"pool"}, nil),
	}))
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.pending
	ch <- c.q
	ch <- c.flight
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.read()
	if err != nil {
		return
	}
	for _, s := range []string{"running", "paused", "completed", "failed"} {
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(st.Runs[s]), s)
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.Pending))
	for pool, n := range st.Queued {
		ch <- prometheus.MustNewConstMetric(c.q, prometheus.GaugeValue, float64(n), pool)
	}
	for pool, n := range st.Inflight {
		ch <- prometheus.MustNewConstMetric(c.flight, prometheus.GaugeValue, float64(n), pool)
	}
}
