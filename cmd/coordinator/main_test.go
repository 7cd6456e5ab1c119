package main

import (
	"bytes"
	"errors"
	"flag"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestParseConfig: every flag reads its default from the environment
// variable it names, and the flag wins over it.
func TestParseConfig(t *testing.T) {
	env := map[string]string{"NATS_URL": "nats://env:4222", "HARNESS_ID": "c-env", "REDIS_URL": "redis://env",
		"HARNESS_PRICES": "env.json", "HARNESS_POOLS": "a,b", "HARNESS_METRICS": "127.0.0.1:9"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want config
	}{
		{"defaults", nil, nil, config{natsURL: "nats://127.0.0.1:4222", pools: "default"}},
		{"environment", env, nil, config{natsURL: "nats://env:4222", id: "c-env", redisURL: "redis://env", pricesFile: "env.json",
			pools: "a,b", metricsAddr: "127.0.0.1:9"}},
		{"flags over environment", env, []string{"--nats", "nats://flag:4222", "--id", "c-flag", "--max-runs", "3", "--redis", "redis://flag",
			"--prices", "flag.json", "--pools", "c", "--metrics", "127.0.0.1:10", "--version"},
			config{natsURL: "nats://flag:4222", id: "c-flag", maxRuns: 3, redisURL: "redis://flag", pricesFile: "flag.json",
				pools: "c", metricsAddr: "127.0.0.1:10", version: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(append([]string{"coordinator"}, tt.args...), func(k string) string { return tt.env[k] }, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmp.AllowUnexported(config{}), cmpopts.IgnoreFields(config{}, "nats")); diff != "" {
				t.Errorf("parseConfig(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// TestRunExits: --help and --version exit 0, a bad flag 2, all before
// anything is dialled.
func TestRunExits(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{{[]string{"-h"}, exitOK}, {[]string{"--version"}, exitOK}, {[]string{"--no-such-flag"}, exitUsage}, {[]string{"--max-runs", "x"}, exitUsage}, {[]string{"extra"}, exitUsage}, {[]string{"--id", "c1", "extra", "--max-runs", "3"}, exitUsage}} {
		var out, errOut bytes.Buffer
		if got := run(append([]string{"coordinator"}, tt.args...), func(string) string { return "" }, &out, &errOut); got != tt.want {
			t.Errorf("run(%q) = %d, want %d\nstderr: %s", tt.args, got, tt.want, errOut.String())
		}
	}
	if _, err := parseConfig([]string{"coordinator", "-h"}, func(string) string { return "" }, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parseConfig(-h) = %v, want flag.ErrHelp", err)
	}
}
