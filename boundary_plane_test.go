package harness_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/backends"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/sandbox"
	"github.com/ioharness/harness/pkg/sandbox/floor"
)

// withServerCredentials returns the NATS URL of the harness process
// serving data with the operator's credentials from its server.json in
// it, for clients that know only a URL.
func withServerCredentials(t *testing.T, rawURL, data string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "server.json"))
	if err != nil {
		t.Fatalf("server.json: %v", err)
	}
	var sf struct{ User, Password string }
	if err := json.Unmarshal(b, &sf); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(sf.User, sf.Password)
	return u.String()
}

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
			res, err := runJSON(t.Context(), cl, floorContract(t, ws, tt.backend, strictDefaults), "r")
			if tt.want != "" {
				if err == nil && res.Outcome == protocol.OutcomeSuccess {
					t.Fatalf("the run succeeded on the floor without the operator's allowance")
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
			res, err := runJSON(t.Context(), cl, floorContract(t, ws, "auto", tt.defaults), "r")
			if err != nil {
				t.Fatal(err)
			}
			refused := res.Outcome != protocol.OutcomeSuccess && strings.Contains(res.Reason, "--allow-permissive")
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
	if _, err := runJSON(t.Context(), cl, c, "attack"); err != nil {
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

// TestProviderKeyNeverReachesAFloorCommand is the fifth attack of issue
// 12 through a real `harness run` process: with the floor allowed, a
// command reads its parent's /proc/PID/environ, where the provider key
// was. The harness process scrubbed it at start: the command, and so the
// trace, see the variable's name and never its value.
func TestProviderKeyNeverReachesAFloorCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the harness binary; run without -short")
	}
	bin := buildRoles(t)
	const secret = "sk-test-do-not-leak-0123456789"
	contract := func(root string) []byte {
		b, _ := json.Marshal(map[string]any{
			"schema": protocol.ContractSchema, "task": "say done", "workspace": map[string]string{"root": root},
			"verification": map[string]any{"command": map[string]any{"argv": []string{"sh", "-c", `tr '\000' '\n' < /proc/$PPID/environ | grep API_KEY`}}},
			"policy": map[string]any{"layers": []any{map[string]any{"name": "t", "rules": []any{
				map[string]string{"act": "exec", "effect": "allow", "pattern": "sh"},
				map[string]string{"act": "exec", "effect": "allow", "pattern": "sh -c*"}}}}, "defaults": strictDefaults},
			"sandbox": map[string]any{"backend": "floor"},
		})
		return b
	}
	// A cassette of the one turn, recorded on this contract.
	rec := provider.NewRecord(provider.NewScripted(&protocol.Turn{Text: "Done."}))
	var c protocol.Contract
	if err := json.Unmarshal(contract(t.TempDir()), &c); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.Run(t.Context(), &c, harness.WithProvider(rec), harness.WithAllowFloor(), harness.WithDataDir(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	cassette := filepath.Join(t.TempDir(), "done.cassette.json")
	if err := rec.Save(cassette); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "contract.json")
	if err := os.WriteFile(path, contract(ws), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "harness"), "run", "--allow-floor", "--data", data, "--replay", cassette, "--id", "leak", path)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+secret)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("harness run: %v\n%s", err, out)
	}
	recs := readTrace(t, data, "leak")
	checked := false
	for _, r := range recs {
		if r.Check != nil && r.Check.Exec != nil {
			checked = true
			if !strings.Contains(r.Check.Output, "OPENAI_API_KEY=") {
				t.Errorf("the command did not read its parent's environment: %q", r.Check.Output)
			}
		}
	}
	if !checked {
		t.Fatal("the verification never ran")
	}
	b, _ := json.Marshal(recs)
	if strings.Contains(string(b)+string(out), secret) {
		t.Errorf("the provider key reached the trace or the output")
	}
	err = filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), secret) {
			t.Errorf("the provider key is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
