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
	env := map[string]string{"NATS_URL": "nats://env:4222", "HARNESS_ID": "s-env", "HARNESS_BACKENDS": "docker",
		"HARNESS_DOCKER_IMAGE": "img:1", "HARNESS_ALLOW_FLOOR": "1", "HARNESS_ALLOW_PERMISSIVE": "1", "HARNESS_GO_CACHE": "/cache",
		"HARNESS_SNAPSHOTS": "/snaps", "HARNESS_METRICS": "127.0.0.1:9"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want config
	}{
		{"defaults", nil, nil, config{natsURL: "nats://127.0.0.1:4222", backends: "native,floor", drain: 30 * time.Second}},
		{"only 1 allows", map[string]string{"HARNESS_ALLOW_FLOOR": "true", "HARNESS_ALLOW_PERMISSIVE": "yes"}, nil,
			config{natsURL: "nats://127.0.0.1:4222", backends: "native,floor", drain: 30 * time.Second}},
		{"environment", env, nil, config{natsURL: "nats://env:4222", id: "s-env", backends: "docker", dockerImage: "img:1",
			allowFloor: true, allowPermissive: true, goCache: "/cache", snapshots: "/snaps", metricsAddr: "127.0.0.1:9", drain: 30 * time.Second}},
		{"flags over environment", env, []string{"--nats", "nats://flag:4222", "--id", "s-flag", "--root", "/a", "--root", "/b",
			"--max-concurrent", "2", "--backends", "native", "--allow-floor=false", "--allow-permissive=false", "--go-cache", "/c2",
			"--images", "--snapshots", "/s2", "--no-snapshots", "--keep-snapshots", "--metrics", "127.0.0.1:10", "--version", "--drain", "5s"},
			config{natsURL: "nats://flag:4222", id: "s-flag", roots: listFlag{"/a", "/b"}, maxConcurrent: 2, backends: "native",
				dockerImage: "img:1", goCache: "/c2", images: true, snapshots: "/s2", noSnapshots: true, keepSnapshots: true,
				metricsAddr: "127.0.0.1:10", version: true, drain: 5 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(append([]string{"sandboxer"}, tt.args...), func(k string) string { return tt.env[k] }, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmp.AllowUnexported(config{}), cmpopts.IgnoreFields(config{}, "nats")); diff != "" {
				t.Errorf("parseConfig(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
	var said bytes.Buffer
	if _, err := parseConfig([]string{"sandboxer", "--root", "/a", "/b"}, func(string) string { return "" }, &said); err == nil || !strings.Contains(said.String(), `unexpected argument "/b"`) {
		t.Errorf("parseConfig(--root /a /b) = %v, said %q; want the stray argument refused", err, said.String())
	}
}
