package process

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
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

// up starts `harness up` on data and returns its NATS URL and process.
func up(t *testing.T, bin, data, cassette, root string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "harness"), "up", "--listen", "127.0.0.1:0", "--data", data, "--replay", cassette, "--root", root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "NATS URL: "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return withServerCredentials(t, u, data), cmd
		}
	}
	t.Fatal("harness up printed no NATS URL")
	return "", nil
}

// recordApproval records the asking agent through a pause and an approval,
// so the processes below can replay the same conversation.
func recordApproval(t *testing.T, d protocol.Decision, twice bool) string {
	t.Helper()
	ws := clustertest.ExampleWorkspace(t)
	rec := provider.NewRecord(clustertest.AskingAgent(twice))
	cl := clustertest.Start(t, harness.Config{AllowFloor: true, Roots: []string{ws}, Provider: rec})
	defer cl.Close()
	if _, err := clustertest.SubmitJSON(t.Context(), cl, clustertest.AskContract(t, ws), "rec"); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitPaused(t, cl.Client, "rec")
	if _, err := cl.Decide(t.Context(), protocol.ApprovalID("rec", 1, 0), &d); err != nil {
		t.Fatal(err)
	}
	clustertest.WaitSettled(t, cl.Client, "rec")
	return saveCassette(t, rec)
}

// TestApprovalOutlivesEveryProcess pauses a run on a cluster, kills the
// whole cluster (NATS included) with SIGKILL, starts it again on the same
// store, and decides with the harness CLI: the run carries on to its
// outcome with the action performed exactly once, or ends denied.
func TestApprovalOutlivesEveryProcess(t *testing.T) {
	bin := roleBinaries(t)
	approve := recordApproval(t, protocol.Decision{Approve: true}, false)
	for _, tt := range []struct {
		name     string
		cassette string
		twice    bool
		args     []string // the harness command that decides, after the restart
		early    *protocol.Decision
		want     protocol.Outcome
		code     string
	}{
		{name: "approve", cassette: approve, args: []string{"approve"}, want: protocol.OutcomeFinished, code: "return a + b"},
		{name: "deny", cassette: approve, args: []string{"deny", "--reason", "not on a Friday"}, want: protocol.OutcomeDenied, code: "return a - b"},
		{name: "rewrite", args: []string{"approve", "--rewrite", `{"path":"calc.go","search":"return a - b","replace":"return b + a"}`},
			want: protocol.OutcomeFinished, code: "return b + a"},
		{name: "remember", twice: true, args: []string{"approve", "--remember"}, want: protocol.OutcomeFinished, code: "return a + b"},
		{name: "decided before the pause was seen", cassette: approve, early: &protocol.Decision{Approve: true}, want: protocol.OutcomeFinished, code: "return a + b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cassette := tt.cassette
			if cassette == "" {
				d := protocol.Decision{Approve: true, Remember: tt.twice}
				if tt.args[len(tt.args)-2] == "--rewrite" {
					d.Rewrite = []byte(tt.args[len(tt.args)-1])
				}
				cassette = recordApproval(t, d, tt.twice)
			}
			data, ws := t.TempDir(), clustertest.ExampleWorkspace(t)
			url, first := up(t, bin, data, cassette, ws)
			c, err := harness.Connect(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			id := protocol.ApprovalID("paused-run", 1, 0)
			if _, err := clustertest.SubmitJSON(t.Context(), c, clustertest.AskContract(t, ws), "paused-run"); err != nil {
				t.Fatal(err)
			}
			if tt.early != nil {
				// A decision is taken only for a run that exists: made as soon
				// as the run does, whether or not its pause is recorded yet.
				testkit.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
					_, err := c.Run("paused-run").Status(t.Context())
					return err
				})
				if _, err := c.Decide(t.Context(), id, tt.early); err != nil {
					t.Fatal(err)
				}
			} else {
				clustertest.WaitPaused(t, c, "paused-run")
			}
			c.Close()
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()

			url, _ = up(t, bin, data, cassette, ws)
			if tt.args != nil {
				cmd := exec.Command(filepath.Join(bin, "harness"), append(append([]string{}, tt.args...), "--nats", url, id)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("harness %s: %v\n%s", tt.args[0], err, out)
				}
			}
			c, err = harness.Connect(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st := clustertest.WaitSettled(t, c, "paused-run")
			if st.Outcome != tt.want {
				t.Fatalf("outcome after the restart = %s (%s), want %s", st.Outcome, st.Reason, tt.want)
			}
			code, err := os.ReadFile(filepath.Join(ws, "calc.go"))
			if err != nil || strings.Count(string(code), tt.code) != 1 || strings.Count(string(code), "\treturn ") != 1 {
				t.Errorf("calc.go = %q, want %q once", code, tt.code)
			}
			aps, err := c.Approvals(t.Context())
			if err != nil || len(aps) != 1 {
				t.Errorf("approvals = %d (%v), want exactly one: remembered writes ask no more", len(aps), err)
			}
		})
	}
}
