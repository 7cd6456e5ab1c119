package harness_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestOneOwnerPerDataDirectory starts a cluster on a data directory: a
// second one, and an Open, are refused at once, naming this process;
// once it closes, the directory opens again. A port in use is refused at
// once too.
func TestOneOwnerPerDataDirectory(t *testing.T) {
	data := t.TempDir()
	cfg := harness.Config{DataDir: data, Roots: []string{t.TempDir()}, Provider: provider.NewScripted()}
	cl, err := harness.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = harness.Start(t.Context(), cfg)
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("in use by process %d", os.Getpid())) {
		t.Fatalf("a second Start on the data directory = %v, want unavailable naming process %d", err, os.Getpid())
	}
	if _, err := harness.Open(t.Context(), data); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Open while a cluster holds the directory = %v, want unavailable", err)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := harness.Open(t.Context(), data)
	if err != nil {
		t.Fatalf("Open after the cluster closed: %v", err)
	}
	c.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg.Listen = l.Addr().String()
	if _, err := harness.Start(t.Context(), cfg); !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), cfg.Listen) {
		t.Fatalf("Start on a port in use = %v, want unavailable naming %s", err, cfg.Listen)
	}
}
