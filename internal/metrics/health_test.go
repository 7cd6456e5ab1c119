package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ioharness/harness/internal/metrics"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthAndReadiness serves a role's metrics: /healthz answers while
// the process serves, /readyz only once the role says it is ready and
// while it stays so, with why it is not; /metrics carries the build.
func TestHealthAndReadiness(t *testing.T) {
	srv, err := metrics.ServeRole("127.0.0.1:0", metrics.NewProcessRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr()
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not connected yet") {
		t.Errorf("/readyz before the role is ready = %d %q, want 503", code, body)
	}
	var cut atomic.Pointer[error]
	srv.SetReady(func() error {
		if e := cut.Load(); e != nil {
			return *e
		}
		return nil
	})
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz once ready = %d, want 200", code)
	}
	e := errors.New("NATS connection reconnecting")
	cut.Store(&e)
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "reconnecting") {
		t.Errorf("/readyz while cut off = %d %q, want 503 saying why", code, body)
	}
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "harness_build_info{") {
		t.Errorf("/metrics has no harness_build_info:\n%s", body)
	}
}
