package streams

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
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
// be read, a user that is not one subject token.
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
		inbox = InboxPrefix + a.User
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

// explainConnect says what a failed dial means for the operator.
func (a Auth) explainConnect(url string, err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		if a.who() == "no credentials" {
			return fmt.Errorf("connect to NATS at %s: the server requires credentials: set NATS_USER and NATS_PASSWORD, or --nats-creds FILE: %w", url, err)
		}
		return fmt.Errorf("connect to NATS at %s: the server refused %s (a wrong password, an unknown user, or expired credentials): %w", url, a.who(), err)
	case a.CAFile != "" && strings.Contains(err.Error(), "x509"):
		return fmt.Errorf("connect to NATS at %s: the server's certificate is not signed by the CA in %s: %w", url, a.CAFile, err)
	case strings.Contains(err.Error(), "tls: "):
		return fmt.Errorf("connect to NATS at %s over TLS: %w", url, err)
	}
	return fmt.Errorf("connect to NATS at %s: %w", url, err)
}
