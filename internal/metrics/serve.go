package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves /metrics, /healthz and /readyz over HTTP until Close.
// /healthz answers 200 while the process serves at all; /readyz answers
// 200 once the role is ready (SetReady; connected to NATS), else 503 with
// why.
type Server struct {
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
	ready atomic.Pointer[func() error]
}

// SetReady sets what /readyz asks: nil from ready means ready. Until it is
// set, the role is not ready. A nil *Server does nothing.
func (s *Server) SetReady(ready func() error) {
	if s != nil {
		s.ready.Store(&ready)
	}
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	err := errors.New("starting: not connected yet")
	if f := s.ready.Load(); f != nil {
		err = (*f)()
	}
	if err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// Listen serves what g gathers on http://addr/metrics (port 0 picks a
// free one), until Close. Give prometheus.Gatherers{...} to serve several
// registries as one. Errors: the address cannot be listened on.
func Listen(addr string, g prometheus.Gatherer) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	s := &Server{ln: ln, done: make(chan struct{})}
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", s.readyz)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// ServeRole serves one role's registry with the process's metrics on
// http://addr/metrics, as a role's main does; an empty addr serves
// nothing and returns a nil *Server, whose Close does nothing. Errors: as
// Listen.
func ServeRole(addr string, role prometheus.Gatherer) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	return Listen(addr, prometheus.Gatherers{role, NewProcessRegistry()})
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the address of the metrics page.
func (s *Server) URL() string { return "http://" + s.Addr() + "/metrics" }

// Close stops the server, waiting up to five seconds for scrapes in
// flight, and returns once it has stopped. A nil *Server does nothing.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
