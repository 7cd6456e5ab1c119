// Package metrics defines the Prometheus metrics of the harness roles and
// serves them on /metrics.
//
// Each role has its own set: NewCoordinator, NewWorker and NewSandboxer
// register theirs on the registry they are given, one registry per role,
// never Prometheus's global default, so the embedded default's three roles
// in one process each keep their own numbers and one /metrics serves them
// together (Gatherers). Every method is safe on a nil receiver, where it
// counts nothing, so a role built without metrics needs no checks.
//
// Label values come from small fixed sets (outcomes, error code names,
// backend and cap names, op kinds, results): never a run id, a path, a
// model's words or anything else a contract or a user chose. A value
// outside its set is counted as "other".
//
// Names, by role (all prefixed harness_):
//
//	coordinator_runs_started_total                     runs accepted
//	coordinator_runs_finished_total{outcome}           runs by outcome
//	coordinator_steps_total                            steps committed
//	coordinator_step_duration_seconds                  from a step's start to its commit
//	coordinator_ledger_draws_total{result}             ledger draws: reserved, settled, released, refused, failed
//	coordinator_ledger_refusals_total{budget}          draws refused, by the budget that ran out
//	coordinator_contracts_rejected_total{code}         submitted contracts refused, by error code
//	coordinator_runs_active                            runs this coordinator is working on now
//	coordinator_runs_waiting                           runs in hand waiting on a turn or a delay
//	coordinator_takeovers_total                        runs taken over from a coordinator gone
//	coordinator_provider_retries_total                 provider calls made again after a retryable failure
//	coordinator_tokens_total{kind}                     tokens settled on the ledger: input, output
//	coordinator_cost_micros_total                      cost settled, in micro-units
//	build_info{version,revision,goversion}             1: which build the process runs
//	runs{status}, approvals_pending                    the cluster's runs by status and actions waiting, read at each scrape
//	pool_queued{pool}, pool_inflight{pool}             step tasks waiting for a worker, and held by one, by pool
//	worker_turns_total{result}                         step tasks served: ok, or the error code's name
//	worker_provider_latency_seconds{provider}          one provider call, answered or not
//	worker_provider_failures_total{provider,code}      provider calls that failed, by error code
//	worker_turns_inflight                              provider calls in flight
//	sandboxer_ops_total{kind,result}                   operations: open, tool, verify, collect, close; ok or error
//	sandboxer_execs_total{backend,result}              commands run: exit_zero, exit_nonzero, killed, cap_hit, not_started
//	sandboxer_exec_duration_seconds{backend}           one command
//	sandboxer_cap_hits_total{backend,cap}              commands stopped by a cap: cpu, wall, memory, pids, open_files
//	sandboxer_snapshots_total{result}                  snapshot workspaces: materialised, refused
//	sandboxer_workspaces_open                          workspaces held now
package metrics

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ioharness/harness/internal/version"
	"github.com/ioharness/harness/pkg/protocol"
)

const namespace = "harness"

// Other is the label value of anything outside a label's set.
const Other = "other"

// NewProcessRegistry returns a registry holding the process's own
// metrics (Go runtime, CPU, memory, open files), to serve beside the
// roles' registries once per process.
func NewProcessRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	v := version.Get()
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "The build of harness this process runs: 1, with its version, revision and Go version as labels."}, []string{"version", "revision", "goversion"})
	info.WithLabelValues(v.Semver(), v.Revision, v.GoVersion).Set(1)
	r.MustRegister(info)
	return r
}

// register registers c on reg, or returns the collector registered there
// already under the same description (a second role of the same kind on
// one registry shares its counters). A nil reg registers nothing.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		// A clash with another collector's description is a bug of ours;
		// the metric is kept, unregistered, rather than fail the role.
	}
	return c
}

// oneOf returns v when it is in set, else Other.
func oneOf(v string, set ...string) string {
	for _, s := range set {
		if v == s {
			return v
		}
	}
	return Other
}

// codeName is the label of an error code: its stable name, or Other for
// a code outside the table.
func codeName(c protocol.Code) string {
	name := c.String()
	if strings.HasPrefix(name, "code_") {
		return Other
	}
	return name
}

// token bounds a label value that comes from configuration (a provider's
// or a backend's name): letters, digits, '-', '_', '.' and '>', at most
// 64 bytes; anything else is Other.
func token(s string) string {
	if s == "" || len(s) > 64 {
		return Other
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.>", r)) {
			return Other
		}
	}
	return s
}

// latency buckets, in seconds: from a millisecond to ten minutes.
var latency = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
