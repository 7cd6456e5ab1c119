package command

import (
	"bytes"
	"strings"
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
		{"defaults", nil, nil, config{natsURL: "nats://127.0.0.1:4222", drain: 30 * time.Second}},
		{"an unreadable duration is the flag's default", map[string]string{"HARNESS_ACK_WAIT": "soon"}, nil, config{natsURL: "nats://127.0.0.1:4222", drain: 30 * time.Second}},
		{"environment", env, nil, config{natsURL: "nats://env:4222", id: "w-env", replay: "env.cassette", turnDelay: 2 * time.Second,
			ackWait: 30 * time.Second, metricsAddr: "127.0.0.1:9", drain: 30 * time.Second}},
		{"flags over environment", env, []string{"--nats", "nats://flag:4222", "--id", "w-flag", "--pool", "a", "--pool", "b",
			"--concurrency", "3", "--replay", "flag.cassette", "--turn-delay", "1s", "--ack-wait", "9s", "--metrics", "127.0.0.1:10", "--version"},
			config{natsURL: "nats://flag:4222", id: "w-flag", pools: listFlag{"a", "b"}, concurrency: 3, replay: "flag.cassette",
				turnDelay: time.Second, ackWait: 9 * time.Second, metricsAddr: "127.0.0.1:10", version: true, drain: 30 * time.Second}},
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
	var said bytes.Buffer
	if _, err := parseConfig([]string{"worker", "--pool", "gpu", "cpu"}, func(string) string { return "" }, &said); err == nil || !strings.Contains(said.String(), `unexpected argument "cpu"`) {
		t.Errorf("parseConfig(--pool gpu cpu) = %v, said %q; want the stray argument refused", err, said.String())
	}
}

// TestProviderFallback: with no key and no cassette the worker answers
// from $HARNESS_REPLAY_FALLBACK (compose ships the example's); a key wins
// over it; without either there is no provider.
func TestProviderFallback(t *testing.T) {
	cassette := "../../../examples/fix-a-test/cassette.json"
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	p, _, err := newProvider("", env(map[string]string{"HARNESS_REPLAY_FALLBACK": cassette}))
	if err != nil || p.Name() != "replay" {
		t.Fatalf("no key, a fallback: %v, %v; want the replay", p, err)
	}
	p, _, err = newProvider("", env(map[string]string{"HARNESS_REPLAY_FALLBACK": cassette, "OPENAI_API_KEY": "sk-test"}))
	if err != nil || p.Name() == "replay" {
		t.Fatalf("a key and a fallback: %v, %v; want the key's provider", p, err)
	}
	if _, _, err := newProvider("", env(nil)); err == nil {
		t.Fatal("no key and no fallback gave a provider")
	}
}
