package streams

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/wire"
)

// Auth are the credentials and TLS settings a role or the CLI connects
// with. The zero value connects anonymously over plain TCP. The password
// and the creds file's content are never printed or logged.
type Auth struct {
	// User and Password authenticate with a user name and password.
	User     string
	Password string
	// CredsFile is a NATS credentials file (a user JWT and its nkey seed).
	CredsFile string
	// NKeyFile is a file holding an nkey seed, for servers that list
	// users by nkey.
	NKeyFile string
	// CAFile is a PEM file of the CA that signed the server's
	// certificate; setting it requires TLS.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key, for
	// servers that verify clients.
	CertFile, KeyFile string
	// Inbox is the prefix of this connection's reply subjects; default
	// _INBOX.<User> when a user is given (so a permission set can let a
	// user read its own answers only), else _INBOX.
	Inbox string
}

// Validate reports a setting that cannot work: a password without a user,
// two ways to authenticate, half a client certificate, a file that cannot
// be read, a CA file with no PEM certificate in it, a client certificate
// and key that do not make a pair, a user that is not one subject token.
func (a Auth) Validate() error {
	ways := 0
	for _, set := range []bool{a.User != "", a.CredsFile != "", a.NKeyFile != ""} {
		if set {
			ways++
		}
	}
	switch {
	case a.Password != "" && a.User == "":
		return errors.New("a NATS password was given without a user: set NATS_USER too")
	case ways > 1:
		return errors.New("give one way to authenticate to NATS: a user and password, a creds file, or an nkey file")
	case (a.CertFile == "") != (a.KeyFile == ""):
		return errors.New("a NATS client certificate needs both --nats-cert and --nats-key")
	case a.User != "" && strings.ContainsAny(a.User, " \t.*>"):
		return fmt.Errorf("NATS user %q cannot name an inbox: use letters, digits, - and _", a.User)
	}
	for _, f := range []struct{ what, path string }{
		{"NATS creds file", a.CredsFile}, {"NATS nkey file", a.NKeyFile}, {"NATS CA file", a.CAFile},
		{"NATS client certificate", a.CertFile}, {"NATS client key", a.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.what, err)
		}
	}
	if a.CAFile != "" {
		b, err := os.ReadFile(a.CAFile)
		if err != nil {
			return fmt.Errorf("NATS CA file: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return fmt.Errorf("NATS CA file %s (--nats-ca, NATS_CA) holds no PEM certificate", a.CAFile)
		}
	}
	if a.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile); err != nil {
			return fmt.Errorf("NATS client certificate %s with the key %s (--nats-cert, --nats-key): %w", a.CertFile, a.KeyFile, err)
		}
	}
	return nil
}

// options returns the nats options for a.
func (a Auth) options() ([]nats.Option, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	}
	if a.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(a.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("NATS nkey file: %w", err)
		}
		opts = append(opts, o)
	}
	if a.CAFile != "" {
		opts = append(opts, nats.RootCAs(a.CAFile))
	}
	if a.CertFile != "" {
		opts = append(opts, nats.ClientCert(a.CertFile, a.KeyFile))
	}
	inbox := a.Inbox
	if inbox == "" && a.User != "" {
		inbox = wire.InboxPrefix + a.User
	}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	return opts, nil
}

// Options returns the nats options for a, for a client that dials NATS
// itself. Errors: those of Validate.
func (a Auth) Options() ([]nats.Option, error) { return a.options() }

// who names the credentials offered, without the secret.
func (a Auth) who() string {
	switch {
	case a.User != "":
		return fmt.Sprintf("user %q", a.User)
	case a.CredsFile != "":
		return "the creds file " + a.CredsFile
	case a.NKeyFile != "":
		return "the nkey in " + a.NKeyFile
	}
	return "no credentials"
}

// ExplainConnect says what a failed dial of url means for the operator:
// which credentials the server refused, or what is wrong with TLS and
// which flag or environment variable changes it. It names files and
// users, never a password or a key. url must already be redacted
// (Redact). The result wraps err.
func (a Auth) ExplainConnect(url string, err error) error {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	msg := err.Error()
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		if a.who() == "no credentials" {
			return fmt.Errorf("connect to NATS at %s: the server requires credentials: set NATS_USER and NATS_PASSWORD, or --nats-creds FILE: %w", url, err)
		}
		return fmt.Errorf("connect to NATS at %s: the server refused %s (a wrong password, an unknown user, or expired credentials): %w", url, a.who(), err)
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("connect to NATS at %s: the server does not offer TLS, which %s requires: turn on tls in the server's configuration, or leave them out: %w", url, a.tlsWhat(), err)
	case errors.As(err, &hostname):
		return fmt.Errorf("connect to NATS at %s: the server's certificate is not for %q: connect with a name the certificate carries (--nats, NATS_URL), or give the server a certificate for this name: %w", url, hostname.Host, err)
	case errors.As(err, &unknownCA) && a.CAFile == "":
		return fmt.Errorf("connect to NATS at %s: the server's TLS certificate is not signed by a CA this machine trusts: pass --nats-ca FILE (or set NATS_CA) with the PEM file of the CA that signed it: %w", url, err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("connect to NATS at %s: the server's TLS certificate is not signed by the CA in %s (--nats-ca, NATS_CA): give the CA that signed the server's certificate: %w", url, a.CAFile, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("connect to NATS at %s: the server's TLS certificate is not valid (expired, not yet valid, or not a server certificate): %w", url, err)
	case clientCertRefused(err) && a.CertFile == "":
		return fmt.Errorf("connect to NATS at %s: the server requires a client certificate: pass --nats-cert FILE and --nats-key FILE (or set NATS_CERT and NATS_KEY) with a certificate signed by a CA the server trusts: %w", url, err)
	case clientCertRefused(err):
		return fmt.Errorf("connect to NATS at %s: the server refused the client certificate %s (--nats-cert, NATS_CERT): it must be signed by a CA in the server's tls ca_file, valid now, and for client authentication: %w", url, a.CertFile, err)
	case errors.Is(err, nats.ErrTLS), strings.Contains(msg, "tls: "):
		return fmt.Errorf("connect to NATS at %s over TLS: %w", url, err)
	}
	return fmt.Errorf("connect to NATS at %s: %w", url, err)
}

// clientCertRefused reports whether a dial failed the way a server that
// verifies clients refuses a connection without an acceptable
// certificate: a TLS alert from the server about the certificate
// ("certificate required", "bad certificate", "unknown certificate
// authority"...), or, with TLS 1.3, where the client finishes its
// handshake before the server has checked its certificate, the server
// closing the connection straight after the handshake.
func clientCertRefused(err error) bool {
	msg := err.Error()
	if _, alert, ok := strings.Cut(msg, "remote error: tls: "); ok {
		return strings.Contains(alert, "certificate")
	}
	return errors.Is(err, nats.ErrTLS) && strings.Contains(msg, "closed by remote after TLS handshake")
}

// tlsWhat names the settings that ask for TLS.
func (a Auth) tlsWhat() string {
	switch {
	case a.CAFile != "" && a.CertFile != "":
		return "--nats-ca and --nats-cert"
	case a.CertFile != "":
		return "--nats-cert (NATS_CERT)"
	case a.CAFile != "":
		return "--nats-ca (NATS_CA)"
	}
	return "a tls:// URL"
}
