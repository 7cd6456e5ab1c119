package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/pkg/protocol"
)

var (
	opKinds = []string{protocol.OpOpen, protocol.OpTool, protocol.OpVerify, protocol.OpCollect, protocol.OpClose}
	caps    = []string{"cpu", "wall", "memory", "pids", "open_files"}
)

// Results of a command, the values Exec counts.
const (
	ExecZero       = "exit_zero"    // exited 0
	ExecNonzero    = "exit_nonzero" // exited with another status
	ExecKilled     = "killed"       // killed by a signal, not a cap
	ExecCapHit     = "cap_hit"      // stopped by a cap
	ExecNotStarted = "not_started"  // could not be started
)

// Sandboxer holds a sandboxer's metrics. A nil *Sandboxer counts nothing.
type Sandboxer struct {
	ops         *prometheus.CounterVec
	execs       *prometheus.CounterVec
	execSeconds *prometheus.HistogramVec
	capHits     *prometheus.CounterVec
	snapshots   *prometheus.CounterVec
}

// NewSandboxer returns a sandboxer's metrics, registered on reg (nil:
// kept, not registered). workspaces, when not nil, is read at each scrape
// for the workspaces the node holds.
func NewSandboxer(reg prometheus.Registerer, workspaces func() float64) *Sandboxer {
	m := &Sandboxer{
		ops: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "sandboxer",
			Name: "ops_total", Help: "Sandbox operations answered, by kind and result (ok, or error when it could not be carried out)."}, []string{"kind", "result"})),
		execs: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "sandboxer",
			Name: "execs_total", Help: "Commands run in a sandbox (tools, verification, git), by backend and how they ended."}, []string{"backend", "result"})),
		execSeconds: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "sandboxer",
			Name: "exec_duration_seconds", Help: "One command in a sandbox, by backend.", Buckets: latency}, []string{"backend"})),
		capHits: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "sandboxer",
			Name: "cap_hits_total", Help: "Commands stopped by a cap, by backend and cap."}, []string{"backend", "cap"})),
		snapshots: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "sandboxer",
			Name: "snapshots_total", Help: "Snapshot workspaces materialised, or refused (hostile, too large, missing)."}, []string{"result"})),
	}
	for _, k := range opKinds {
		m.ops.WithLabelValues(k, "ok")
		m.ops.WithLabelValues(k, "error")
	}
	m.snapshots.WithLabelValues("materialised")
	m.snapshots.WithLabelValues("refused")
	if workspaces != nil {
		register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "sandboxer",
			Name: "workspaces_open", Help: "Workspaces this node holds open for runs."}, workspaces))
	}
	return m
}

// Op counts an operation answered; failed when it could not be carried
// out at all (a tool that ran and failed is not a failed operation).
func (m *Sandboxer) Op(kind string, failed bool) {
	if m == nil {
		return
	}
	result := "ok"
	if failed {
		result = "error"
	}
	m.ops.WithLabelValues(oneOf(kind, opKinds...), result).Inc()
}

// Exec counts one command run on backend: its report, or nil when it
// could not be started.
func (m *Sandboxer) Exec(backend string, rep *protocol.ExecReport) {
	if m == nil {
		return
	}
	b := token(backend)
	var result string
	switch {
	case rep == nil:
		result = ExecNotStarted
	case rep.CapHit != "":
		result = ExecCapHit
		m.capHits.WithLabelValues(b, oneOf(rep.CapHit, caps...)).Inc()
	case !rep.Exited:
		result = ExecKilled
	case rep.ExitCode == 0:
		result = ExecZero
	default:
		result = ExecNonzero
	}
	m.execs.WithLabelValues(b, result).Inc()
	if rep != nil {
		m.execSeconds.WithLabelValues(b).Observe((time.Duration(rep.DurationMS) * time.Millisecond).Seconds())
	}
}

// Snapshot counts a snapshot workspace materialised, or refused.
func (m *Sandboxer) Snapshot(refused bool) {
	if m == nil {
		return
	}
	if refused {
		m.snapshots.WithLabelValues("refused").Inc()
	} else {
		m.snapshots.WithLabelValues("materialised").Inc()
	}
}
