//go:build !linux || !(amd64 || arm64)

package native

import (
	"context"
	"fmt"
	"runtime"

	"github.com/ioharness/harness/pkg/sandbox"
)

// Backend is the native Linux backend; on this system it cannot be created.
type Backend struct{}

// New returns an error wrapping ErrUnavailable: the native
// backend needs Linux on amd64 or arm64.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: it needs Linux on amd64 or arm64, not %s/%s", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
}

// Name returns "native".
func (*Backend) Name() string { return "native" }

// Enforces returns nothing: no Backend exists here.
func (*Backend) Enforces() []string { return nil }

// Layers returns nothing: no Backend exists here.
func (*Backend) Layers() []string { return nil }

// Leftovers returns nothing: no Backend exists here.
func (*Backend) Leftovers() ([]string, error) { return nil, nil }

// Close does nothing: no Backend exists here.
func (*Backend) Close() error { return nil }

// Run is never called: New returns no Backend here.
func (n *Backend) Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error) {
	_, err := New(Config{})
	return nil, err
}
