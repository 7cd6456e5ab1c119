package harness_test

import (
	"strings"
	"testing"

	"github.com/ioharness/harness"
)

func TestServing(t *testing.T) {
	w := func(pools string) harness.Instance {
		return harness.Instance{Service: "harness-worker", Metadata: map[string]string{"pools": pools}}
	}
	s := func(backends string) harness.Instance {
		return harness.Instance{Service: "harness-sandboxer", Metadata: map[string]string{"backends": backends}}
	}
	for _, tt := range []struct {
		name          string
		fleet         []harness.Instance
		pool, backend string
		want          string // "" when the fleet serves the run
	}{
		{"served", []harness.Instance{w("default"), s("native,floor")}, "", "auto", ""},
		{"served by name", []harness.Instance{w("gpu,default"), s("docker")}, "gpu", "docker", ""},
		{"no worker", []harness.Instance{s("native")}, "", "", "no worker is running"},
		{"other pools", []harness.Instance{w("a"), w("b"), s("native")}, "c", "", "no worker serves pool c (the workers serve a, b)"},
		{"no sandboxer", []harness.Instance{w("default")}, "", "", "no sandboxer is running"},
		{"no such backend", []harness.Instance{w("default"), s("native")}, "", "docker", "no sandboxer has the docker backend (they have native)"},
	} {
		got := harness.Serving(tt.fleet, tt.pool, tt.backend)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: Serving = %q, want %q", tt.name, got, tt.want)
		}
	}
}
