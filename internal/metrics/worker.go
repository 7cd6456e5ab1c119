package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/pkg/protocol"
)

// Worker holds a worker's metrics. A nil *Worker counts nothing.
type Worker struct {
	turns            *prometheus.CounterVec
	providerSeconds  *prometheus.HistogramVec
	providerFailures *prometheus.CounterVec
	bases            *prometheus.CounterVec
}

// NewWorker returns a worker's metrics, registered on reg (nil: kept, not
// registered). inflight, when not nil, is read at each scrape for the
// provider calls in flight.
func NewWorker(reg prometheus.Registerer, inflight func() float64) *Worker {
	m := &Worker{
		turns: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "worker",
			Name: "turns_total", Help: "Step tasks served, by result: ok, or the name of the error code that ended the call."}, []string{"result"})),
		providerSeconds: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "worker",
			Name: "provider_latency_seconds", Help: "One provider call, answered or failed, by the provider that served or was asked.", Buckets: latency},
			[]string{"provider"})),
		providerFailures: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "worker",
			Name: "provider_failures_total", Help: "Provider calls that failed, by provider and error code."}, []string{"provider", "code"})),
	}
	m.bases = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "worker",
		Name: "task_bases_total", Help: "Step tasks that extend an earlier task of their run, by where the request whole came from: kept (this worker served the earlier one), asked (the coordinator gave it whole), or lost (neither: the task was dropped)."},
		[]string{"found"}))
	for _, f := range []string{"kept", "asked", "lost"} {
		m.bases.WithLabelValues(f)
	}
	m.turns.WithLabelValues("ok")
	if inflight != nil {
		register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "worker",
			Name: "turns_inflight", Help: "Provider calls in flight."}, inflight))
	}
	return m
}

// Turn counts one step task served: ok (err nil), or by the code of the
// error that ended it, whether the provider was called or not.
func (m *Worker) Turn(err *protocol.Error) {
	if m == nil {
		return
	}
	if err == nil {
		m.turns.WithLabelValues("ok").Inc()
		return
	}
	m.turns.WithLabelValues(codeName(err.Code)).Inc()
}

// Base counts one step task that extends an earlier one, by where its
// request whole was found: kept, asked or lost.
func (m *Worker) Base(found string) {
	if m != nil {
		m.bases.WithLabelValues(found).Inc()
	}
}

// Provider counts one provider call: the provider that served it (or was
// asked, when it failed), how long it took, and its error, if any.
func (m *Worker) Provider(provider string, d time.Duration, err *protocol.Error) {
	if m == nil {
		return
	}
	p := token(provider)
	m.providerSeconds.WithLabelValues(p).Observe(d.Seconds())
	if err != nil {
		m.providerFailures.WithLabelValues(p, codeName(err.Code)).Inc()
	}
}
