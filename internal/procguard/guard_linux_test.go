//go:build linux

package procguard

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const childEnv = "PROCGUARD_TEST_CHILD"

// TestMain lets the test binary be the child whose environment is read.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := Protect(); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		if os.Getenv("OPENAI_API_KEY") != "sk-test-secret-value" {
			os.Stderr.WriteString("os.Getenv lost the key")
			os.Exit(4)
		}
		b, err := os.ReadFile("/proc/self/environ")
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(5)
		}
		os.Stdout.Write(b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProtectHidesSecretsFromEnviron: after Protect, the process's
// /proc/PID/environ (what a floor command read to steal a provider key)
// holds no secret value, while the process itself still has it.
func TestProtectHidesSecretsFromEnviron(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{childEnv + "=1", "OPENAI_API_KEY=sk-test-secret-value", "HARNESS_TENANT_PASSWORD=hunter2", "PATH=/usr/bin", "PLAIN=visible"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, cmd.Stderr)
	}
	env := string(out)
	for _, secret := range []string{"sk-test-secret-value", "hunter2"} {
		if strings.Contains(env, secret) {
			t.Errorf("/proc/self/environ still holds %q after Protect: %q", secret, env)
		}
	}
	if !strings.Contains(env, "PLAIN=visible") || !strings.Contains(env, "OPENAI_API_KEY=") {
		t.Errorf("/proc/self/environ lost what is not secret: %q", env)
	}
}

func TestSecret(t *testing.T) {
	for name, want := range map[string]bool{"OPENAI_API_KEY": true, "anthropic_api_key": true, "GITHUB_TOKEN": true, "NATS_PASSWORD": true,
		"REDIS_URL": true, "PATH": false, "HOME": false, "OPENAI_MODEL": false} {
		if got := Secret(name); got != want {
			t.Errorf("Secret(%q) = %v, want %v", name, got, want)
		}
	}
}
