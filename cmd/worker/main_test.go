package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestParseConfig: every flag reads its default from the environment
// variable it names, and the flag wins over it. (run itself is tested by
// building the binary, in internal/version: it hardens the process first.)
func TestParseConfig(t *testing.T) {
	env := map[string]string{"NATS_URL": "nats://env:4222", "HARNESS_ID": "w-env", "HARNESS_REPLAY": "env.cassette",
		"HARNESS_TURN_DELAY": "2s", "HARNESS_ACK_WAIT": "30s", "HARNESS_METRICS": "127.0.0.1:9"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want config
	}{
		{"defaults", nil, nil, config{natsURL: "nats://127.0.0.1:4222"}},
		{"an unreadable duration is the flag's default", map[string]string{"HARNESS_ACK_WAIT": "soon"}, nil, config{natsURL: "nats://127.0.0.1:4222"}},
		{"environment", env, nil, config{natsURL: "nats://env:4222", id: "w-env", replay: "env.cassette", turnDelay: 2 * time.Second,
			ackWait: 30 * time.Second, metricsAddr: "127.0.0.1:9"}},
		{"flags over environment", env, []string{"--nats", "nats://flag:4222", "--id", "w-flag", "--pool", "a", "--pool", "b",
			"--concurrency", "3", "--replay", "flag.cassette", "--turn-delay", "1s", "--ack-wait", "9s", "--metrics", "127.0.0.1:10", "--version"},
			config{natsURL: "nats://flag:4222", id: "w-flag", pools: listFlag{"a", "b"}, concurrency: 3, replay: "flag.cassette",
				turnDelay: time.Second, ackWait: 9 * time.Second, metricsAddr: "127.0.0.1:10", version: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(append([]string{"worker"}, tt.args...), func(k string) string { return tt.env[k] }, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmp.AllowUnexported(config{}), cmpopts.IgnoreFields(config{}, "nats")); diff != "" {
				t.Errorf("parseConfig(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
	if _, err := parseConfig([]string{"worker", "--concurrency", "many"}, func(string) string { return "" }, &bytes.Buffer{}); err == nil {
		t.Error("parseConfig(--concurrency many) = nil error, want one")
	}
}
