package sandboxer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/policy"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// floorName is the name of the backend that isolates nothing.
const floorName = "floor"

// admit refuses, when its workspace opens, a contract this node will not
// run: one naming the floor without the operator's AllowFloor, or whose
// verification command would have to fall back to it, or whose policy
// allows every command or connection by default without AllowPermissive. The
// refusal is typed and says what the operator can do, so the run ends
// before its first step instead of failing at its first command.
func (s *Sandboxer) admit(op *protocol.SandboxOp) error {
	var spec protocol.SandboxSpec
	if op.Sandbox != nil {
		spec = *op.Sandbox
	}
	// A contract naming a backend this node will not use is refused now;
	// so is one whose verification is a command with no backend to run
	// on. Any other command is refused when it comes, with the same
	// reason, and the model reads it.
	if _, err := s.backend(spec.Backend); err != nil && (spec.Backend == floorName || op.Verification != nil && op.Verification.Command != nil) {
		return err
	}
	if op.Policy == nil || s.cfg.AllowPermissive {
		return nil
	}
	pol, err := compilePolicy(op.Policy)
	if err != nil {
		return protocol.FieldError(protocol.CodeInvalidField, "policy", "fix the policy", "the run's policy does not compile: %s", err.Error())
	}
	d := pol.Defaults()
	var open []string
	if d.Exec == policy.Allow {
		open = append(open, "exec")
	}
	if d.Net == policy.Allow {
		open = append(open, "net")
	}
	if len(open) == 0 {
		return nil
	}
	return protocol.FieldError(protocol.CodeInvalidField, "policy.defaults",
		"list what the agent may run and dial as allow rules, and leave the defaults at ask or deny; or ask the sandboxer's operator to start it with --allow-permissive",
		"the policy allows %s by default, so the agent could run or dial anything; this sandboxer's operator does not permit a blanket allow (--allow-permissive)",
		strings.Join(open, " and "))
}

// backend picks the backend a contract asks for: for "auto" the best this
// node has that isolates its commands, else the one of that name. The floor
// is picked, by name or as the last resort of "auto", only when the
// operator allowed it. Errors: CodeUnsupported when the node has no
// backend of that name, or none it may use.
func (s *Sandboxer) backend(name string) (sandbox.Backend, error) {
	if name == "" || name == "auto" {
		for _, b := range s.cfg.Backends {
			if b.Name() != floorName || s.cfg.AllowFloor {
				return b, nil
			}
		}
		return nil, protocol.FieldError(protocol.CodeUnsupported, "sandbox.backend",
			"ask the sandboxer's operator for a native or docker sandbox"+s.missing()+", or to allow unsandboxed commands with --allow-floor",
			"this sandboxer has no sandbox that isolates commands, and its operator has not allowed the floor backend, which runs them unsandboxed as the sandboxer's own user")
	}
	for _, b := range s.cfg.Backends {
		if b.Name() != name {
			continue
		}
		if name == floorName && !s.cfg.AllowFloor {
			return nil, protocol.FieldError(protocol.CodeUnsupported, "sandbox.backend",
				`use "auto" for the best sandbox this node has; only the sandboxer's operator can allow the floor (--allow-floor)`,
				"the floor backend runs commands unsandboxed, as the sandboxer's own user, and this sandboxer's operator has not allowed it")
		}
		return b, nil
	}
	return nil, protocol.FieldError(protocol.CodeUnsupported, "sandbox.backend", `use "auto", or one of this sandboxer's backends: `+strings.Join(s.usableNames(), ", "),
		"this sandboxer has no %s backend%s", name, s.why(name))
}

// usableNames are the backends a contract may name here.
func (s *Sandboxer) usableNames() []string {
	var names []string
	for _, b := range s.cfg.Backends {
		if b.Name() != floorName || s.cfg.AllowFloor {
			names = append(names, b.Name())
		}
	}
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

// why says why the backend called name is missing here, if the operator
// asked for it and its probe failed.
func (s *Sandboxer) why(name string) string {
	if r, ok := s.cfg.Missing[name]; ok {
		return " (" + r + ")"
	}
	return ""
}

// missing lists the backends the operator asked for that did not start,
// with their reasons, for a refusal.
func (s *Sandboxer) missing() string {
	if len(s.cfg.Missing) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.cfg.Missing))
	for n := range s.cfg.Missing {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %s", n, s.cfg.Missing[n])
	}
	return " (not available here: " + strings.Join(parts, "; ") + ")"
}

func (s *Sandboxer) backendNames() []string {
	names := make([]string, len(s.cfg.Backends))
	for i, b := range s.cfg.Backends {
		names[i] = b.Name()
	}
	return names
}

// shutdownTimeout bounds how long a backend that is a sandbox.Shutdowner
// may take to end the commands it still has and clean up after them.
const shutdownTimeout = 30 * time.Second

// reconcile has each backend that leaves state outside this process
// (sandbox.Reconciler) remove what an earlier process of this node left
// behind.
func (s *Sandboxer) reconcile(ctx context.Context) {
	for _, b := range s.cfg.Backends {
		r, ok := b.(sandbox.Reconciler)
		if !ok {
			continue
		}
		if n, err := r.Reconcile(ctx, nil); err != nil {
			s.log.Warn("reconcile sandboxes", "backend", b.Name(), "err", err)
		} else if n > 0 {
			s.log.Info("removed leftover sandboxes", "backend", b.Name(), "count", n)
		}
	}
}

// closeBackends releases the backends once no operation is in flight: a
// sandbox.Closer is closed, a sandbox.Shutdowner shut down within
// shutdownTimeout.
func (s *Sandboxer) closeBackends() {
	for _, b := range s.cfg.Backends {
		switch c := b.(type) {
		case sandbox.Closer:
			_ = c.Close()
		case sandbox.Shutdowner:
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			_ = c.Shutdown(ctx)
			cancel()
		}
	}
}
