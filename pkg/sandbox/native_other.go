//go:build !linux || !(amd64 || arm64)

package sandbox

import (
	"context"
	"fmt"
	"runtime"
)

// Native is the native Linux backend; on this system it cannot be created.
type Native struct{}

// NewNative returns an error wrapping ErrNativeUnavailable: the native
// backend needs Linux on amd64 or arm64.
func NewNative(cfg NativeConfig) (*Native, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: it needs Linux on amd64 or arm64, not %s/%s", ErrNativeUnavailable, runtime.GOOS, runtime.GOARCH)
}

// Name returns "native".
func (*Native) Name() string { return "native" }

// Enforces returns nothing: no Native exists here.
func (*Native) Enforces() []string { return nil }

// Layers returns nothing: no Native exists here.
func (*Native) Layers() []string { return nil }

// Leftovers returns nothing: no Native exists here.
func (*Native) Leftovers() ([]string, error) { return nil, nil }

// Run is never called: NewNative returns no Native here.
func (n *Native) Run(ctx context.Context, spec Spec) (*Result, error) {
	_, err := NewNative(NativeConfig{})
	return nil, err
}
