package worker

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		bad  string
	}{
		{"zero value", Config{}, ""},
		{"a pool that is no subject token", Config{Pools: []string{"gpu.large"}}, "pool"},
		{"an id that is no subject token", Config{ID: "w 1"}, "id"},
		{"negative concurrency", Config{Concurrency: -1}, "Concurrency"},
	} {
		err := tt.cfg.Validate()
		if (err != nil) != (tt.bad != "") || (err != nil && !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("%s: Validate() = %v, want an error about %q", tt.name, err, tt.bad)
		}
	}
	if _, err := New(nil, nil, nil, nil, Config{}); err == nil {
		t.Error("New without a provider succeeded")
	}
}
