package documents

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestMain(m *testing.M) {
	Register("test.upper", func(_ context.Context, _ json.RawMessage, in []byte) (*Result, error) {
		return &Result{Text: strings.ToUpper(string(in))}, nil
	})
	Register("test.hog", func(_ context.Context, _ json.RawMessage, in []byte) (*Result, error) {
		var keep [][]byte
		for { // what a zip bomb does to a parser that believes it
			b := make([]byte, 64<<20)
			for i := range b {
				b[i] = byte(i)
			}
			keep = append(keep, b)
		}
	})
	Register("test.spin", func(ctx context.Context, _ json.RawMessage, in []byte) (*Result, error) {
		for {
		}
	})
	Register("test.refuse", func(_ context.Context, _ json.RawMessage, in []byte) (*Result, error) {
		return nil, Errorf("not a spreadsheet: %q", in)
	})
	RunChildIfRequested() // after the registrations, as a format's init comes before main
	os.Exit(m.Run())
}

// TestCallIsolated runs operations in a child process: a plain one
// answers, a refusal comes back typed, and one that eats memory or never
// ends is stopped within its limits without touching this process.
func TestCallIsolated(t *testing.T) {
	Isolate(true)
	defer Isolate(false)
	saved := DefaultLimits
	defer func() { DefaultLimits = saved }()
	DefaultLimits.MemoryBytes = 512 << 20
	DefaultLimits.Timeout = 3 * time.Second

	res, err := Call(context.Background(), "test.upper", nil, []byte("quarterly"))
	if err != nil || res.Text != "QUARTERLY" {
		t.Fatalf("plain operation: %+v, %v", res, err)
	}
	_, err = Call(context.Background(), "test.refuse", nil, []byte("x"))
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "not a spreadsheet") {
		t.Fatalf("refusal: %v", err)
	}
	if raceBuild {
		// The child has no memory limit under the race detector;
		// scripts/test runs this package again without it.
		t.Log("the memory limit is not applied in a race build")
	} else if _, err = Call(context.Background(), "test.hog", nil, nil); !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "limits") {
		t.Fatalf("memory hog: %v, want a refusal naming the limits", err)
	}
	_, err = Call(context.Background(), "test.spin", nil, nil)
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("endless parse: %v, want a refusal naming the time limit", err)
	}
	_, err = Call(context.Background(), "test.upper", nil, make([]byte, DefaultLimits.MaxFileBytes+1))
	if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), "over the document tools' limit") {
		t.Fatalf("oversize input: %v", err)
	}
	if _, err = Call(context.Background(), "xlsx.nothing", nil, nil); !errors.Is(err, protocol.ErrUnsupported) {
		t.Fatalf("unknown operation: %v", err)
	}
}
