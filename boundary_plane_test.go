package harness_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
)

// TestEmbeddedClusterAuthenticatesEveryConnection: the embedded cluster's
// listener and its unix socket take only the operator's credentials, made
// afresh at each start; anything else (a sandboxed command dialling the
// port it found, a guess) is refused before it can publish a contract or
// a decision.
func TestEmbeddedClusterAuthenticatesEveryConnection(t *testing.T) {
	data := t.TempDir()
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: data, Listen: "127.0.0.1:0", Socket: harness.SocketPath(data),
		Provider: provider.NewScripted()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	user, password := cl.Credentials()
	if user == "" || len(password) < 32 {
		t.Fatalf("credentials %q / %d bytes, want a user and a long random password", user, len(password))
	}
	for _, tt := range []struct {
		name string
		opts []nats.Option
	}{
		{"anonymous", nil},
		{"wrong password", []nats.Option{nats.UserInfo(user, "guess")}},
		{"a role's name", []nats.Option{nats.UserInfo("harness-coordinator", "")}},
	} {
		nc, err := nats.Connect(cl.URL(), append(tt.opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected to the listener, want refused", tt.name)
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization error", tt.name, err)
		}
		opts := append([]nats.Option{nats.SetCustomDialer(harness.SocketDialer{Path: cl.Socket()}), nats.MaxReconnects(0)}, tt.opts...)
		if nc, err := nats.Connect("nats://localhost", opts...); err == nil {
			nc.Close()
			t.Errorf("%s: connected through the socket, want refused", tt.name)
		}
	}
	c, err := harness.DialSocket(t.Context(), cl.Socket(), user, password)
	if err != nil {
		t.Fatalf("the operator through the socket: %v", err)
	}
	c.Close()
	nc, err := nats.Connect(cl.URL(), nats.UserInfo(user, password))
	if err != nil {
		t.Fatalf("the operator on the listener: %v", err)
	}
	nc.Close()
	if fi, err := os.Stat(cl.Socket()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v, mode %v, want 0600", cl.Socket(), err, fi.Mode().Perm())
	}
	// The next start makes new credentials.
	cl.Close()
	again, err := harness.Start(t.Context(), harness.Config{DataDir: data, Listen: "127.0.0.1:0", Provider: provider.NewScripted()})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, p := again.Credentials(); p == password {
		t.Error("a new start kept the old password")
	}
}

// TestSocketOnlyClusterOpensNoPort: with a socket and no listener (how
// harness run serves its data directory) the server has no TCP port.
func TestSocketOnlyClusterOpensNoPort(t *testing.T) {
	data := t.TempDir()
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: data, Socket: harness.SocketPath(data), Provider: provider.NewScripted()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if u := cl.URL(); u != "" {
		t.Errorf("URL() = %q, want no listener", u)
	}
	if a := cl.Server().Addr(); a != nil {
		t.Errorf("the server listens on %v", a)
	}
	if p := cl.Server().MonitorAddr(); p != nil {
		t.Errorf("the server serves monitoring on %v", p)
	}
}

// floorContract runs one command, `true`, and verifies with a command: on
// backend.
func floorContract(t *testing.T, ws, backend string, defaults map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"schema":       protocol.ContractSchema,
		"task":         "run true",
		"workspace":    map[string]string{"root": ws},
		"verification": map[string]any{"command": map[string]any{"argv": []string{"true"}, "expect_exit": 0}},
		"policy": map[string]any{"layers": []any{map[string]any{"name": "t", "rules": []any{
			map[string]string{"act": "exec", "effect": "allow", "pattern": "true"}}}}, "defaults": defaults},
		"sandbox": map[string]any{"backend": backend},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var strictDefaults = map[string]string{"read": "allow", "write": "deny", "exec": "deny", "net": "deny"}

// TestFloorIsTheOperatorsToAllow: a contract cannot pick the floor, nor
// be run on it because nothing better is here; only the operator's
// AllowFloor lets commands run unsandboxed, and then every report says
// so.
func TestFloorIsTheOperatorsToAllow(t *testing.T) {
	turns := func() *provider.Scripted {
		return provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "1", Name: "exec", Arguments: json.RawMessage(`{"argv":["true"]}`)}}},
			&protocol.Turn{Text: "Done."})
	}
	for _, tt := range []struct {
		name, backend string
		allow         bool
		want          string // the refusal's words, "" for success
	}{
		{"named, not allowed", "floor", false, "--allow-floor"},
		{"auto falls back, not allowed", "auto", false, "--allow-floor"},
		{"named, allowed", "floor", true, ""},
		{"auto, allowed", "auto", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws}, Provider: turns(),
				Backends: []sandbox.Backend{floor.New()}, AllowFloor: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			res, err := clustertest.RunJSON(t.Context(), cl, floorContract(t, ws, tt.backend, strictDefaults), "r")
			if tt.want != "" {
				if err == nil && res.Outcome != protocol.OutcomeRefused {
					t.Fatalf("the run ended %s (%s), want refused before its first step", res.Outcome, res.Reason)
				}
				msg := fmt.Sprint(err)
				if res != nil {
					msg += " " + res.Reason
				}
				if !strings.Contains(msg, tt.want) {
					t.Errorf("refusal %q does not say what the operator can do (%s)", msg, tt.want)
				}
				recs, _ := cl.Run("r").Trace(t.Context())
				for _, r := range recs {
					if r.Kind == protocol.RecordStep {
						t.Errorf("a step ran (step %d) before the refusal", r.Step)
					}
				}
				return
			}
			if err != nil || res.Outcome != protocol.OutcomeSuccess {
				t.Fatalf("run = %v, %+v; want success", err, res)
			}
			recs, err := cl.Run("r").Trace(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			reports := 0
			for _, r := range recs {
				for _, o := range r.Observations {
					if o.Exec != nil {
						reports++
						if !o.Exec.Unsandboxed || !strings.Contains(o.Content, "[unsandboxed") {
							t.Errorf("exec on the floor: unsandboxed %v, content %q; want it said", o.Exec.Unsandboxed, o.Content)
						}
					}
				}
				if r.Check != nil && r.Check.Exec != nil {
					reports++
					if !r.Check.Exec.Unsandboxed {
						t.Errorf("the verification's report does not say it ran unsandboxed")
					}
				}
			}
			if reports < 2 {
				t.Errorf("%d exec reports in the trace, want the call's and the verification's", reports)
			}
		})
	}
}

// TestBlanketAllowIsTheOperatorsToAllow: a contract whose policy allows
// every command or connection by default is refused before its first
// step unless the operator allows it.
func TestBlanketAllowIsTheOperatorsToAllow(t *testing.T) {
	for _, tt := range []struct {
		name     string
		defaults map[string]string
		allow    bool
		refused  bool
	}{
		{"exec allow", map[string]string{"exec": "allow", "net": "deny"}, false, true},
		{"net allow", map[string]string{"exec": "deny", "net": "allow"}, false, true},
		{"exec allow, allowed", map[string]string{"exec": "allow", "net": "deny"}, true, false},
		{"listed rules", strictDefaults, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Roots: []string{ws},
				Provider: provider.NewScripted(&protocol.Turn{Text: "Done."}), AllowFloor: true, AllowPermissive: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			res, err := clustertest.RunJSON(t.Context(), cl, floorContract(t, ws, "auto", tt.defaults), "r")
			if err != nil {
				t.Fatal(err)
			}
			refused := res.Outcome == protocol.OutcomeRefused && strings.Contains(res.Reason, "--allow-permissive")
			if refused != tt.refused {
				t.Errorf("outcome %s (%s): refused %v, want %v", res.Outcome, res.Reason, refused, tt.refused)
			}
		})
	}
}

// TestSandboxedCommandCannotReachTheControlPlane is the first attack of
// issue 12 through the real roles: a command the policy allows, in a
// native sandbox that may use the network, dials the embedded cluster's
// NATS port on the host's loopback. It cannot connect, so it cannot
// submit a contract or decide an approval.
func TestSandboxedCommandCannotReachTheControlPlane(t *testing.T) {
	bs, _, err := backends.Build(t.Context(), "native", backends.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		if os.Getenv("HARNESS_REQUIRE_NATIVE") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no native sandbox here (HARNESS_REQUIRE_NATIVE=1 makes this a failure): %v", err)
	}
	ws := t.TempDir()
	// The probe needs the port, which is known once the cluster is up.
	agent := &lateProvider{}
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Roots: []string{ws}, Backends: bs, Provider: agent})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(cl.URL(), "nats://"))
	probe, _ := json.Marshal(map[string]any{"argv": []string{"bash", "-c", "if exec 3<>/dev/tcp/127.0.0.1/" + port + "; then echo REACHED; head -c 4 <&3; fi"}})
	agent.Scripted = provider.NewScripted(&protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "1", Name: "exec", Arguments: probe}}}, &protocol.Turn{Text: "Done."})
	c, _ := json.Marshal(map[string]any{
		"schema": protocol.ContractSchema, "task": "dial the control plane", "workspace": map[string]string{"root": ws},
		"verification": map[string]any{"none": map[string]any{}},
		"policy": map[string]any{"layers": []any{map[string]any{"name": "t", "rules": []any{
			map[string]string{"act": "exec", "effect": "allow", "pattern": "bash*"}}}}, "defaults": strictDefaults},
		"sandbox": map[string]any{"backend": "native", "network": true},
	})
	if _, err := clustertest.RunJSON(t.Context(), cl, c, "attack"); err != nil {
		t.Fatal(err)
	}
	recs, err := cl.Run("attack").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	for _, r := range recs {
		for _, o := range r.Observations {
			if o.Exec == nil {
				continue
			}
			ran = true
			if strings.Contains(o.Content, "REACHED") || strings.Contains(o.Content, "INFO") {
				t.Errorf("the sandboxed command reached the cluster's NATS: %s", o.Content)
			}
		}
	}
	if !ran {
		for _, r := range recs {
			for _, o := range r.Observations {
				t.Logf("step %d %s: %s %s", r.Step, o.Tool, o.State(), o.Content)
			}
		}
		t.Fatal("the probe never ran")
	}
}

// lateProvider is a scripted provider filled in after the cluster starts.
type lateProvider struct{ *provider.Scripted }

func (p *lateProvider) Name() string { return "scripted" }
