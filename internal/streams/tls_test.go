package streams_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ioharness/harness/internal/streams"
	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/internal/tlstest"
)

// startTLS starts an embedded NATS server with JetStream that requires
// TLS, configured as docs/security.md tells an operator to: a tls block
// with the server's certificate for hosts, signed by ca, and with verify
// the CA's file to check the clients' certificates against.
func startTLS(t *testing.T, ca *tlstest.CA, verify bool, hosts ...string) *server.Server {
	t.Helper()
	p := ca.Server(t, "nats", hosts...)
	conf := fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n", p.CertFile, p.KeyFile)
	if verify {
		conf += fmt.Sprintf("  ca_file: %q\n  verify: true\n", ca.File)
	}
	conf += "}\n"
	path := filepath.Join(t.TempDir(), "tls.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return testkit.NATS(t, testkit.Config(t, path), testkit.Listen)
}

// roleOptions builds Connect's options the way cmd/worker and the other
// roles' mains do: from the role's flags, defaulting to the environment.
func roleOptions(t *testing.T, env map[string]string, args ...string) streams.Options {
	t.Helper()
	fs := flag.NewFlagSet("role", flag.ContinueOnError)
	f := streams.RoleFlags(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o, err := f.Options()
	if err != nil {
		t.Fatalf("role flags %v: %v", args, err)
	}
	return o
}

// dialRefused connects with o and returns the error, failing t if the
// connection was made.
func dialRefused(t *testing.T, url string, o streams.Options) error {
	t.Helper()
	nc, _, _, err := streams.Connect(t.Context(), url, "harness-worker", o)
	if err == nil {
		nc.Close()
		t.Fatal("connected, want refused")
	}
	return err
}

// wantSays fails t unless err holds every one of says.
func wantSays(t *testing.T, err error, says ...string) {
	t.Helper()
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q\ndoes not say %q", err, s)
		}
	}
}

// TestTLS connects the roles to a server that requires TLS: with the CA
// that signed the server's certificate they ensure and bind the streams;
// without it, with another CA, or to a name the certificate does not
// carry, the connection is refused with an error naming what to set.
func TestTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "harness-test")
	url := startTLS(t, ca, false, "127.0.0.1", "localhost").ClientURL()
	if !strings.HasPrefix(url, "tls://") {
		t.Fatalf("server URL %s, want a TLS server", url)
	}
	plainURL := strings.Replace(url, "tls://", "nats://", 1)

	t.Run("the coordinator ensures and a worker binds", func(t *testing.T) {
		// The coordinator is given the CA by flag, the worker by its
		// environment; each dials a nats:// URL and TLS is still required.
		cnc, _, cassets, err := streams.Connect(t.Context(), plainURL, "harness-coordinator",
			roleOptions(t, nil, "--nats-ca", ca.File))
		if err != nil {
			t.Fatalf("coordinator with --nats-ca: %v", err)
		}
		defer cnc.Close()
		if cassets.Trace == nil {
			t.Fatal("coordinator ensured no trace stream")
		}
		wnc, _, wassets, err := streams.Connect(t.Context(), plainURL, "harness-worker",
			roleOptions(t, map[string]string{"NATS_CA": ca.File, "HARNESS_BIND_STREAMS": "1"}))
		if err != nil {
			t.Fatalf("worker with NATS_CA and --bind-streams: %v", err)
		}
		defer wnc.Close()
		if wassets.Trace == nil {
			t.Fatal("worker bound to no trace stream")
		}
		st, err := wnc.TLSConnectionState()
		if err != nil || !st.HandshakeComplete || len(st.VerifiedChains) == 0 {
			t.Errorf("worker's connection: TLS state %+v, %v; want a verified chain", st, err)
		}
	})

	t.Run("without the CA", func(t *testing.T) {
		err := dialRefused(t, url, roleOptions(t, map[string]string{"NATS_USER": "worker", "NATS_PASSWORD": "pw-secret"}))
		wantSays(t, err, "--nats-ca", "NATS_CA", "not signed by a CA this machine trusts")
		if strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("error %q shows the password", err)
		}
	})

	t.Run("with another CA", func(t *testing.T) {
		other := tlstest.NewCA(t, "other")
		err := dialRefused(t, url, roleOptions(t, nil, "--nats-ca", other.File))
		wantSays(t, err, "not signed by the CA in "+other.File, "--nats-ca")
	})

	t.Run("a certificate for another name", func(t *testing.T) {
		elsewhere := startTLS(t, ca, false, "nats-1").ClientURL()
		err := dialRefused(t, elsewhere, roleOptions(t, nil, "--nats-ca", ca.File))
		wantSays(t, err, `certificate is not for "127.0.0.1"`, "NATS_URL")
	})

	t.Run("a server without TLS", func(t *testing.T) {
		plain := testkit.NATS(t, testkit.Listen, func(o *server.Options) { o.JetStream = false }).ClientURL()
		err := dialRefused(t, plain, roleOptions(t, nil, "--nats-ca", ca.File))
		wantSays(t, err, "does not offer TLS", "--nats-ca")
	})
}

// TestTLSClientCertificates connects to a server that verifies clients
// (verify: true): a role presenting a certificate the server's CA signed
// connects and the server sees who it is; one without a certificate, or
// with one another CA signed, is refused and told which flags to set.
func TestTLSClientCertificates(t *testing.T) {
	ca := tlstest.NewCA(t, "harness-test")
	srv := startTLS(t, ca, true, "127.0.0.1")
	url := srv.ClientURL()
	worker := ca.Client(t, "worker")

	nc, _, assets, err := streams.Connect(t.Context(), url, "harness-coordinator",
		roleOptions(t, map[string]string{"NATS_CERT": worker.CertFile, "NATS_KEY": worker.KeyFile}, "--nats-ca", ca.File))
	if err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	defer nc.Close()
	if assets.Steps == nil {
		t.Fatal("no steps stream ensured")
	}
	// The server knows the connection by the certificate it presented.
	cz, err := srv.Connz(&server.ConnzOptions{Username: true})
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, c := range cz.Conns {
		for _, pc := range c.TLSPeerCerts {
			subjects = append(subjects, pc.Subject)
		}
	}
	if !slices.Contains(subjects, "CN=worker") {
		t.Errorf("the server saw client certificates %q, want CN=worker", subjects)
	}

	t.Run("without a client certificate", func(t *testing.T) {
		err := dialRefused(t, url, roleOptions(t, nil, "--nats-ca", ca.File))
		wantSays(t, err, "requires a client certificate", "--nats-cert", "--nats-key", "NATS_CERT")
	})
	t.Run("with a certificate another CA signed", func(t *testing.T) {
		stranger := tlstest.NewCA(t, "other").Client(t, "worker")
		err := dialRefused(t, url, roleOptions(t, nil, "--nats-ca", ca.File, "--nats-cert", stranger.CertFile, "--nats-key", stranger.KeyFile))
		wantSays(t, err, "refused the client certificate "+stranger.CertFile)
	})
}

// TestTLSFilesChecked checks that a CA file that holds no certificate, or
// a client certificate given with another's key, stops a role before it
// dials, saying which flag is wrong.
func TestTLSFilesChecked(t *testing.T) {
	ca := tlstest.NewCA(t, "harness-test")
	a, b := ca.Client(t, "a"), ca.Client(t, "b")
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		auth streams.Auth
		says string
	}{
		{"a CA file without a certificate", streams.Auth{CAFile: notPEM}, "--nats-ca"},
		{"a key that is not the certificate's", streams.Auth{CertFile: a.CertFile, KeyFile: b.KeyFile}, "--nats-key"},
		{"a certificate without its key", streams.Auth{CertFile: a.CertFile}, "--nats-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.auth.Validate()
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error", tt.auth)
			}
			wantSays(t, err, tt.says)
		})
	}
	if err := (streams.Auth{CAFile: ca.File, CertFile: a.CertFile, KeyFile: a.KeyFile}).Validate(); err != nil {
		t.Errorf("Validate(a CA and a matching pair) = %v, want nil", err)
	}
}
