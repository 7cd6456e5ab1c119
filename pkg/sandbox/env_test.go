package sandbox

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestMinimalEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("HTTPS_PROXY", "http://proxy")
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("CGO_ENABLED", "0")
	tests := []struct {
		name    string
		home    *string // nil: unset HOME
		extra   []string
		want    []string
		wantNot []string
	}{
		{"allowlist only", ptr("/home/x"), nil,
			[]string{"PATH=/usr/bin:/bin", "HOME=/home/x", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"},
			[]string{"OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "HTTPS_PROXY"}},
		{"HOME falls back to the temp dir", nil, nil, []string{"HOME=" + os.TempDir()}, nil},
		{"extra overrides and adds", ptr("/home/x"), []string{"PATH=/opt/bin", "GOCACHE=/c", "junk"},
			[]string{"PATH=/opt/bin", "GOCACHE=/c"}, []string{"PATH=/usr/bin:/bin", "junk"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.home == nil {
				t.Setenv("HOME", "")
				os.Unsetenv("HOME")
			} else {
				t.Setenv("HOME", *tt.home)
			}
			env := MinimalEnv(tt.extra...)
			for _, w := range tt.want {
				if !slices.Contains(env, w) {
					t.Errorf("MinimalEnv(%q) = %q, want it to contain %q", tt.extra, env, w)
				}
			}
			keys := map[string]bool{}
			for _, kv := range env {
				k, _, _ := strings.Cut(kv, "=")
				if keys[k] {
					t.Errorf("MinimalEnv(%q) has %s twice: %q", tt.extra, k, env)
				}
				keys[k] = true
				for _, bad := range tt.wantNot {
					if kv == bad || k == bad {
						t.Errorf("MinimalEnv(%q) = %q, must not contain %q", tt.extra, env, bad)
					}
				}
				if !slices.Contains(allowedEnv, k) && !slices.ContainsFunc(tt.extra, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
					t.Errorf("MinimalEnv(%q) has %q, which is neither allowlisted nor extra", tt.extra, kv)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }
