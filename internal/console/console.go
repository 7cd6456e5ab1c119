// Package console is harness's web console: a server of HTML pages for
// the people who watch runs and decide approvals, on the same NATS
// subjects, streams and buckets the command line uses, connected with
// credentials of its own (harness.ConsoleUser).
//
// It serves the runs (a live list, filtered by state and searched by id or
// task), a run's story (its trace as a timeline, its sub-agents, what the
// model was sent at each step, a cancel button), the approvals waiting
// for a person (approve, approve with a rewrite, remember, deny with a
// reason) and the fleet (the roles' micro services, the queue of each
// pool, tokens and cost over time). Pages are html/template with a little
// plain JavaScript: live updates come as server-sent events from
// harness.events.>, never by polling.
//
// Every request signs in: a bearer token, or the session cookie the login
// form sets, with the tokens of a token file (LoadTokens) naming who each
// person is and whether they may decide. Every change is a POST carrying
// the session's CSRF token, and is recorded as the person who made it.
//
// The caller's steps: connect a harness.Client with the console's
// credentials (harness.BindClient), LoadTokens, New, then Serve on a
// listener (Listen: loopback unless told otherwise), and Close.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ioharness/harness"
)

// DefaultListen is where the console listens when told nothing: the
// loopback interface only.
const DefaultListen = "127.0.0.1:7070"

// Config configures a console server.
type Config struct {
	// Client reads the cluster and carries decisions and cancels to it.
	// Required; connected with the console's own credentials.
	Client *harness.Client
	// Tokens are who may sign in. Required: there is no default password.
	Tokens *Tokens
	// TLS says the console is served over TLS (Serve with a certificate):
	// its cookies are then Secure. Default false.
	TLS bool
	// CertFile and KeyFile serve the console over TLS; both or neither.
	CertFile, KeyFile string
	// FleetWait is how long the fleet page waits for the roles' micro
	// services to answer; default 300 ms.
	FleetWait time.Duration
	// Logger receives what the console does; default discards it.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Validate says what is missing or wrong in c.
func (c *Config) Validate() error {
	switch {
	case c.Client == nil:
		return errors.New("console: no client: connect one with the console's credentials")
	case c.Tokens == nil:
		return errors.New("console: no tokens: pass --token-file FILE (there is no default password)")
	case (c.CertFile == "") != (c.KeyFile == ""):
		return errors.New("console: give both a TLS certificate and its key, or neither")
	}
	return nil
}

// Server is the console: an http.Handler, and the live events it follows.
type Server struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	sessions *sessions
	pages    map[string]*template.Template // by page: the layout with the page's own templates
	mux      *http.ServeMux
	hub      *hub
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns a console server and starts following harness.events.>.
// Errors: a Config that does not validate; the subscription refused.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CertFile != "" {
		cfg.TLS = true
	}
	if cfg.FleetWait <= 0 {
		cfg.FleetWait = 300 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now, sessions: newSessions(cfg.Now), pages: map[string]*template.Template{}}
	for _, page := range []string{"login", "runs", "run", "request", "approvals", "fleet", "error"} {
		t, err := template.New("").Funcs(funcs()).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console templates: %w", err)
		}
		s.pages[page] = t
	}
	var err error
	if s.hub, err = startHub(s); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Close stops following the live events and ends the pages' streams.
func (s *Server) Close() { s.hub.close() }

// ServeHTTP serves the console, with the headers every page carries: no
// script, style or frame from anywhere else, nothing cached, no referrer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if s.cfg.TLS {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	s.mux.ServeHTTP(w, r)
}

// Listen opens addr for the console (DefaultListen when ""). A port of 0
// picks a free one.
func Listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = DefaultListen
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("console: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Loopback reports whether the listener's address is on the loopback
// interface: anything else is reachable from other machines.
func Loopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// Serve serves the console on ln until ctx ends, then shuts down, giving
// the requests in hand five seconds. Errors: the server's, other than
// its closing.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() {
		if s.cfg.CertFile != "" {
			errc <- srv.ServeTLS(ln, s.cfg.CertFile, s.cfg.KeyFile)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.hub.close() // the event streams end, so Shutdown need not wait them out
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.signedIn(s.logout))
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/runs", http.StatusSeeOther) })
	m.HandleFunc("GET /runs", s.signedIn(s.runsPage))
	m.HandleFunc("GET /runs/{run}", s.signedIn(s.runPage))
	m.HandleFunc("GET /runs/{run}/story", s.signedIn(s.storyFragment))
	m.HandleFunc("GET /runs/{run}/steps/{step}", s.signedIn(s.requestPage))
	m.HandleFunc("POST /runs/{run}/cancel", s.changing(s.cancel))
	m.HandleFunc("GET /approvals", s.signedIn(s.approvalsPage))
	m.HandleFunc("POST /approvals/{id}", s.changing(s.decide))
	m.HandleFunc("GET /fleet", s.signedIn(s.fleetPage))
	m.HandleFunc("GET /live", s.signedIn(s.live))
	s.mux = m
}

// signedIn refuses a request that is not signed in: 401, with the login
// form for a page.
func (s *Server) signedIn(h func(http.ResponseWriter, *http.Request, *viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := s.who(r)
		if v == nil {
			s.refuseLogin(w, r)
			return
		}
		h(w, r, v)
	}
}

// changing is signedIn for a request that changes something: it must be
// a decider's, and carry the session's CSRF token (checkChange); a forged
// or unpermitted one is refused with 403 and changes nothing.
func (s *Server) changing(h func(http.ResponseWriter, *http.Request, *viewer)) http.HandlerFunc {
	return s.signedIn(func(w http.ResponseWriter, r *http.Request, v *viewer) {
		r.Body = http.MaxBytesReader(w, r.Body, 256<<10)
		if why := checkChange(r, v); why != "" {
			s.log.Warn("change refused", "path", r.URL.Path, "principal", v.P.Name, "why", why)
			s.fail(w, r, v, http.StatusForbidden, "Refused: "+why+".")
			return
		}
		if !v.P.CanDecide() {
			s.fail(w, r, v, http.StatusForbidden, fmt.Sprintf("Refused: %s may view but not decide or cancel (the token file names them a viewer).", v.P.Name))
			return
		}
		h(w, r, v)
	})
}

func (s *Server) refuseLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path != "/live" {
		s.renderLogin(w, http.StatusUnauthorized, r.URL.RequestURI(), "Sign in to see this page.")
		return
	}
	http.Error(w, "401 unauthorized: sign in at /login, or send Authorization: Bearer TOKEN", http.StatusUnauthorized)
}
