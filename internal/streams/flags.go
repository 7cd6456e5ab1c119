package streams

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/wire"
)

// Flags are the NATS settings every role and the harness CLI take, each
// from a flag or, by default, its environment variable. The password is
// read from $NATS_PASSWORD or a file ($NATS_PASSWORD_FILE), never from a
// flag, so it stays out of process listings.
type Flags struct {
	auth         Auth
	passwordFile string
	getenv       func(string) string
	// Replicas and Bind are the roles' stream settings (see Options).
	Replicas int
	Bind     bool
	BindWait time.Duration
}

// AuthFlags registers the credential and TLS flags on fs, defaulting to
// the environment getenv reads.
func AuthFlags(fs *flag.FlagSet, getenv func(string) string) *Flags {
	f := &Flags{getenv: getenv}
	fs.StringVar(&f.auth.User, "nats-user", getenv("NATS_USER"), "NATS user; the password comes from $NATS_PASSWORD or $NATS_PASSWORD_FILE ($NATS_USER)")
	fs.StringVar(&f.passwordFile, "nats-password-file", getenv("NATS_PASSWORD_FILE"), "file holding the NATS password ($NATS_PASSWORD_FILE)")
	fs.StringVar(&f.auth.CredsFile, "nats-creds", getenv("NATS_CREDS"), "NATS credentials file: a user JWT and its nkey seed ($NATS_CREDS)")
	fs.StringVar(&f.auth.NKeyFile, "nats-nkey", getenv("NATS_NKEY"), "file holding an nkey seed ($NATS_NKEY)")
	fs.StringVar(&f.auth.CAFile, "nats-ca", getenv("NATS_CA"), "PEM file of the CA that signed the NATS server's certificate; requires TLS ($NATS_CA)")
	fs.StringVar(&f.auth.CertFile, "nats-cert", getenv("NATS_CERT"), "client certificate for NATS servers that verify clients ($NATS_CERT)")
	fs.StringVar(&f.auth.KeyFile, "nats-key", getenv("NATS_KEY"), "the client certificate's key ($NATS_KEY)")
	return f
}

// RoleFlags registers AuthFlags and the stream settings of a role.
func RoleFlags(fs *flag.FlagSet, getenv func(string) string) *Flags {
	f := AuthFlags(fs, getenv)
	replicas, _ := strconv.Atoi(getenv("HARNESS_REPLICAS"))
	bind, _ := strconv.ParseBool(getenv("HARNESS_BIND_STREAMS"))
	fs.IntVar(&f.Replicas, "replicas", replicas, "replication factor of the streams and buckets this role creates: 3 on a three-node cluster (default: 1 when creating, and what exists is left alone) ($HARNESS_REPLICAS)")
	fs.BoolVar(&f.Bind, "bind-streams", bind, "create no stream, bucket or consumer: wait for the coordinators' and bind to them, for credentials that may only use them ($HARNESS_BIND_STREAMS)")
	fs.DurationVar(&f.BindWait, "bind-wait", wire.DefaultBindWait, "how long --bind-streams waits for the coordinators to create what it binds to")
	return f
}

// Auth returns the credentials the flags give, with the password read.
// Errors: an unreadable password file, and those of Auth.Validate.
func (f *Flags) Auth() (Auth, error) {
	a := f.auth
	a.Password = f.getenv("NATS_PASSWORD")
	if f.passwordFile != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return Auth{}, fmt.Errorf("NATS password file: %w", err)
		}
		a.Password = strings.TrimRight(string(b), "\r\n")
	}
	if err := a.Validate(); err != nil {
		return Auth{}, err
	}
	return a, nil
}

// Options returns Connect's options for a role: the credentials and the
// stream settings. Errors: those of Auth.
func (f *Flags) Options() (Options, error) {
	a, err := f.Auth()
	if err != nil {
		return Options{}, err
	}
	if f.Replicas < 0 || f.Replicas > 5 {
		return Options{}, fmt.Errorf("--replicas %d: JetStream replicates 1 to 5 times", f.Replicas)
	}
	return Options{Auth: a, Streams: wire.Config{Replicas: f.Replicas}, Bind: f.Bind, BindWait: f.BindWait}, nil
}

// Redact returns a NATS URL list with any password in it replaced, for
// logs and errors.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "REDACTED")
		} else {
			u.User = url.User("REDACTED")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// FlagsOnly refuses the arguments left after fs's flags, which a role
// takes none of: a stray word (a value given without its flag, a flag
// after a word) would otherwise be dropped unseen. It says so on stderr,
// as the flag package says what it refuses.
func FlagsOnly(fs *flag.FlagSet, stderr io.Writer) error {
	if fs.NArg() == 0 {
		return nil
	}
	err := fmt.Errorf("unexpected argument %q: %s takes flags only (-h lists them), and a flag after an argument is not read", fs.Arg(0), fs.Name())
	fmt.Fprintln(stderr, err)
	return err
}
