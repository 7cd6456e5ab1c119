package harness_test

import (
	"testing"

	"github.com/ioharness/harness/internal/bench"
)

// BenchmarkStep measures the harness's own overhead per step on the
// embedded default with the trace synced to disk: a run of b.N steps with a
// scripted provider that answers at once and a trivial tool, beside a bare
// JetStream publish-with-ack on the same server. ns/op is the whole
// measurement over b.N; read step-p50-ns and the ratio.
func BenchmarkStep(b *testing.B) {
	rep, err := bench.Run(b.Context(), bench.Config{Dir: b.TempDir(), Steps: max(b.N, 10), Publishes: 1000, LatencyOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rep.StepP50.Nanoseconds()), "step-p50-ns")
	b.ReportMetric(float64(rep.StepP99.Nanoseconds()), "step-p99-ns")
	b.ReportMetric(float64(rep.PublishP50.Nanoseconds()), "publish-p50-ns")
	b.ReportMetric(rep.Ratio(), "step/publish")
}

// BenchmarkThroughput measures steps per second from one coordinator
// across 16 concurrent runs.
func BenchmarkThroughput(b *testing.B) {
	rep, err := bench.Run(b.Context(), bench.Config{Dir: b.TempDir(), Steps: max(b.N/16, 10), Runs: 16, Publishes: 200})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rep.StepsPerSecond, "steps/s")
}
