package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/internal/tlstest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// TestStatusOverTLS reads a run's status from a cluster whose NATS server
// requires TLS with a certificate from a CA made for the test: with
// --nats-ca it answers; without, it exits 1 saying which flag to set.
func TestStatusOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "harness-test")
	cert := ca.Server(t, "nats", "127.0.0.1")
	conf := filepath.Join(t.TempDir(), "tls.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "tls {\n  cert_file: %q\n  key_file: %q\n}\n", cert.CertFile, cert.KeyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testkit.NATS(t, testkit.Config(t, conf), testkit.Listen)
	url := strings.Replace(srv.ClientURL(), "tls://", "nats://", 1)

	// A coordinator's connection records a finished run in the index.
	nc, _, assets, err := streams.Connect(t.Context(), url, "harness-coordinator", streams.Options{Auth: streams.Auth{CAFile: ca.File}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &protocol.RunState{Run: "r-tls", Status: protocol.StatusCompleted, Outcome: protocol.OutcomeSuccess, Step: 3, Tokens: 1290, Task: "fix", Started: at, Updated: at}
	if err := trace.NewIndex(assets.Runs, nil).Put(t.Context(), st); err != nil {
		t.Fatal(err)
	}

	env := map[string]string{"NATS_URL": url}
	code, out, errOut := cli(t, t.Context(), env, "status", "--nats-ca", ca.File, "r-tls")
	if code != exitOK || !strings.Contains(out, "outcome  success") || !strings.Contains(out, "steps    3") {
		t.Errorf("status --nats-ca = %d\nstdout: %s\nstderr: %s\nwant exit 0 and the run's outcome and steps", code, out, errOut)
	}
	code, out, errOut = cli(t, t.Context(), env, "status", "r-tls")
	if code != exitError || !strings.Contains(errOut, "--nats-ca") || !strings.Contains(errOut, "NATS_CA") {
		t.Errorf("status without a CA = %d\nstdout: %s\nstderr: %s\nwant exit 1 and an error naming --nats-ca and NATS_CA", code, out, errOut)
	}
}
