package harness

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ioharness/harness/internal/metrics"
)

// registries are an embedded cluster's metric registries: one per role,
// as each role has on a machine of its own, and the process's.
type registries struct {
	coordinator, worker, sandboxer, process *prometheus.Registry
}

func newRegistries() registries {
	return registries{coordinator: prometheus.NewRegistry(), worker: prometheus.NewRegistry(),
		sandboxer: prometheus.NewRegistry(), process: metrics.NewProcessRegistry()}
}

// Metrics gathers the cluster's Prometheus metrics: the coordinator's,
// worker's and sandboxer's (each kept on a registry of its own, never the
// global default), and the process's. It is what Config.MetricsListen
// serves; an embedder may serve it on its own /metrics.
func (c *Cluster) Metrics() prometheus.Gatherer {
	r := c.regs
	return prometheus.Gatherers{r.coordinator, r.worker, r.sandboxer, r.process}
}

// MetricsURL is the address of the cluster's metrics page, or "" when
// Config.MetricsListen was empty.
func (c *Cluster) MetricsURL() string {
	if c.metrics == nil {
		return ""
	}
	return c.metrics.URL()
}
