package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Cookie names. The session cookie is HttpOnly, SameSite=Strict, and
// Secure when the console is served over TLS.
const (
	sessionCookie = "harness_console"
	// loginCookie holds the login form's own CSRF token (the form posts it
	// back beside the token), so a page elsewhere cannot sign a browser in.
	loginCookie = "harness_console_login"
)

// SessionTTL is how long a session the login form opened lasts.
const SessionTTL = 12 * time.Hour

// maxSessions bounds the sessions held at once; the oldest goes first.
const maxSessions = 4096

// viewer is who makes a request: the principal, and the CSRF token its
// forms carry (empty for a request with a bearer token, which a page
// elsewhere cannot make a browser send).
type viewer struct {
	P      *Principal
	CSRF   string
	Bearer bool
}

type session struct {
	principal *Principal
	csrf      string
	expires   time.Time
}

// sessions are the signed-in browsers, by the secret their cookie holds.
type sessions struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*session
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, m: make(map[string]*session)}
}

// open starts a session for p and returns its cookie's secret.
func (s *sessions) open(p *Principal) (id string, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, v := range s.m {
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions {
		var oldest string
		for k, v := range s.m {
			if oldest == "" || v.expires.Before(s.m[oldest].expires) {
				oldest = k
			}
		}
		delete(s.m, oldest)
	}
	id = secret()
	sess = &session{principal: p, csrf: secret(), expires: now.Add(SessionTTL)}
	s.m[id] = sess
	return id, sess
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.m[id]
	if sess == nil {
		return nil
	}
	if s.now().After(sess.expires) {
		delete(s.m, id)
		return nil
	}
	return sess
}

func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// who says who made r: a bearer token in the Authorization header, or the
// session cookie the login form set; nil for neither.
func (s *Server) who(r *http.Request) *viewer {
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return nil
		}
		if p := s.cfg.Tokens.Lookup(strings.TrimSpace(token)); p != nil {
			return &viewer{P: p, Bearer: true}
		}
		return nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	sess := s.sessions.get(c.Value)
	if sess == nil {
		return nil
	}
	return &viewer{P: sess.principal, CSRF: sess.csrf}
}

// checkChange refuses a state-changing request that a page elsewhere could
// have made: from a session, it must carry the session's CSRF token (the
// form's csrf field or an X-CSRF-Token header) and, when the browser says
// where it comes from, come from the console itself. A bearer token is
// not sent by a browser on its own, so it needs neither. It returns the
// reason for a refusal, or "".
func checkChange(r *http.Request, v *viewer) string {
	if v.Bearer {
		return ""
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" && !sameOrigin(r, o) {
		return "the request comes from another site (" + o + ")"
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(v.CSRF)) != 1 {
		return "the request does not carry this session's CSRF token; reload the page and try again"
	}
	return ""
}

func sameOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return origin == scheme+r.Host
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.cfg.TLS})
}

// secret is 32 random bytes in hex.
func secret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
