package testkit_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
)

// fatals is a testing.TB that records Fatalf instead of ending the test,
// so the failure paths can be checked. Any other method panics.
type fatals struct {
	testing.TB
	got []string
}

func (*fatals) Helper() {}

func (f *fatals) Fatalf(format string, args ...any) {
	f.got = append(f.got, fmt.Sprintf(format, args...))
}

func TestCheckForReturnsOnceFSucceeds(t *testing.T) {
	rec := &fatals{}
	calls := 0
	start := time.Now()
	testkit.CheckFor(rec, 10*time.Second, time.Millisecond, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 || len(rec.got) != 0 {
		t.Errorf("CheckFor called f %d times and failed with %q, want 3 calls and no failure", calls, rec.got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("CheckFor returned after %v, want at once when f succeeds", d)
	}
}

func TestCheckForReportsTheLastError(t *testing.T) {
	rec := &fatals{}
	calls := 0
	const wait = 50 * time.Millisecond
	start := time.Now()
	testkit.CheckFor(rec, wait, 5*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("attempt %d", calls)
	})
	if d := time.Since(start); d < wait {
		t.Errorf("CheckFor gave up after %v, want at least %v", d, wait)
	}
	if want := fmt.Sprintf("attempt %d", calls); calls < 2 || len(rec.got) != 1 || !strings.Contains(rec.got[0], want) {
		t.Errorf("CheckFor failed with %q after %d calls, want once, with %q", rec.got, calls, want)
	}
}

func TestUntil(t *testing.T) {
	rec := &fatals{}
	calls := 0
	testkit.Until(rec, 10*time.Second, func() bool { calls++; return calls == 2 })
	if calls != 2 || len(rec.got) != 0 {
		t.Errorf("Until checked %d times and failed with %q, want 2 checks and no failure", calls, rec.got)
	}
	testkit.Until(rec, 20*time.Millisecond, func() bool { return false })
	if len(rec.got) != 1 || !strings.Contains(rec.got[0], "after 20ms") {
		t.Errorf("Until of a condition that never holds failed with %q, want one failure after 20ms", rec.got)
	}
}

// TestNATS checks the server has JetStream on a temporary store and no
// port, answers in-process connections, and is shut down when its test
// ends.
func TestNATS(t *testing.T) {
	var srv *server.Server
	t.Run("the server", func(t *testing.T) {
		srv = testkit.NATS(t)
		if srv.Addr() != nil || !srv.JetStreamEnabled() || !strings.HasPrefix(srv.StoreDir(), os.TempDir()) {
			t.Errorf("server listens on %v, JetStream %t, store %s; want no port and JetStream on a temporary store", srv.Addr(), srv.JetStreamEnabled(), srv.StoreDir())
		}
		js, err := jetstream.New(testkit.Conn(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "b"}); err != nil {
			t.Errorf("creating a bucket over the in-process connection: %v", err)
		}
	})
	if srv.Running() {
		t.Error("the server still runs after its test ended")
	}
}

// TestNATSOptions starts a server from a configuration file with a port:
// the file's settings hold, and the test's store and port replace its own.
func TestNATSOptions(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("listen: 0.0.0.0:4222\nhttp: 0.0.0.0:8222\nmax_payload: 4321\njetstream { store_dir: /nowhere }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testkit.NATS(t, testkit.Config(t, conf), testkit.Listen)
	if srv.MonitorAddr() != nil || strings.HasPrefix(srv.StoreDir(), "/nowhere") {
		t.Errorf("monitoring on %v, store %s; want none and a temporary store", srv.MonitorAddr(), srv.StoreDir())
	}
	url := srv.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":4222") {
		t.Errorf("ClientURL() = %s, want a free port on 127.0.0.1", url)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	defer nc.Close()
	if got := nc.MaxPayload(); got != 4321 {
		t.Errorf("MaxPayload() = %d, want the file's 4321", got)
	}
}

// TestOnlyTestsImportIt checks no program or library of the module links
// the embedded server through testkit, bar the conformance suite's
// support package.
func TestOnlyTestsImportIt(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/ioharness/harness/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const kit = "github.com/ioharness/harness/internal/testkit"
	// Packages that are themselves imported only by tests.
	allowed := map[string]bool{
		"github.com/ioharness/harness/pkg/sandbox/sandboxtest": true,
		"github.com/ioharness/harness/pkg/ledger/ledgertest":   true,
		"github.com/ioharness/harness/internal/clustertest":    true,
		"github.com/ioharness/harness/e2e":                     true, // the e2e suite's cluster driver
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		seen++
		if !allowed[pkg] && strings.Contains(" "+imports+" ", " "+kit+" ") {
			t.Errorf("%s imports %s outside its tests", pkg, kit)
		}
	}
	if seen < 10 {
		t.Fatalf("go list named %d packages, want the module's: the rule tests nothing", seen)
	}
}
