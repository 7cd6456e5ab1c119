package console_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/console"
	"github.com/ioharness/harness/internal/tlstest"
	"github.com/ioharness/harness/pkg/protocol"
)

func TestParseTokens(t *testing.T) {
	long := "0123456789abcdef0123"
	tests := []struct {
		name, file string
		want       map[string]console.Role // by token
		err        string                  // in the error, "" for none
	}{
		{name: "named", file: "alice:" + long + "\n", want: map[string]console.Role{long: console.Decider}},
		{name: "viewer", file: "# people\n\nbob:" + long + ":viewer\n", want: map[string]console.Role{long: console.Viewer}},
		{name: "bare token", file: long + "\n", want: map[string]console.Role{long: console.Decider}},
		{name: "empty", file: "# nobody\n", err: "holds no token"},
		{name: "short", file: "alice:short\n", err: "line 1: the token of alice is shorter than 16"},
		{name: "bad role", file: "alice:" + long + ":admin\n", err: `role "admin"`},
		{name: "bad name", file: "al ice:" + long + "\n", err: "name"},
		{name: "twice", file: "alice:" + long + "\nalice:" + long + "x\n", err: "line 2: alice is named twice"},
		{name: "shared", file: "alice:" + long + "\nbob:" + long + "\n", err: "also alice's"},
		{name: "too many fields", file: "a:b:c:d\n", err: "expected NAME:TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toks, err := console.ParseTokens("f", []byte(tt.file))
			if tt.err != "" {
				var te *console.TokenFileError
				if !errors.As(err, &te) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseTokens(%q) = %v, want a *TokenFileError saying %q", tt.file, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTokens(%q) = %v", tt.file, err)
			}
			for tok, role := range tt.want {
				if p := toks.Lookup(tok); p == nil || p.Role != role {
					t.Errorf("Lookup(%q) = %+v, want role %s", tok, p, role)
				}
			}
			if p := toks.Lookup(long + "0"); p != nil {
				t.Errorf("Lookup of a token not in the file = %+v, want nil", p)
			}
		})
	}
}

// TestLoadTokensRefuses checks the console starts with no token file at
// all, and none that others may read.
func TestLoadTokensRefuses(t *testing.T) {
	if _, err := console.LoadTokens(""); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf(`LoadTokens("") = %v, want a refusal naming --token-file`, err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("alice:0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := console.LoadTokens(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("LoadTokens of a 0644 file = %v, want a refusal saying chmod 600", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := console.LoadTokens(path); err != nil {
		t.Errorf("LoadTokens of a 0600 file: %v", err)
	}
}

// session is a browser-like HTTP client of the console: it keeps cookies
// and does not follow redirects, so each answer is seen.
type session struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newSession(t *testing.T, base string) *session {
	jar, _ := cookiejar.New(nil)
	return &session{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (s *session) do(method, path string, form url.Values, header http.Header) (int, string) {
	s.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`name="(?:csrf|login_csrf)" value="([0-9a-f]+)"`)

// signIn signs the session in through the login form and returns the
// CSRF token the pages carry.
func (s *session) signIn(token string) string {
	s.t.Helper()
	_, page := s.do("GET", "/login", nil, nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		s.t.Fatalf("the login page has no CSRF field: %s", page)
	}
	status, _ := s.do("POST", "/login", url.Values{"token": {token}, "login_csrf": {m[1]}, "next": {"/runs"}}, nil)
	if status != http.StatusSeeOther {
		s.t.Fatalf("sign in: status %d, want 303", status)
	}
	_, page = s.do("GET", "/runs", nil, nil)
	if m = csrfField.FindStringSubmatch(page); m == nil {
		s.t.Fatalf("the runs page has no CSRF field (signed in?): %s", page)
	}
	return m[1]
}

// TestTheConsoleRefuses checks, over plain HTTP, what the console refuses:
// every page without a login, a wrong token, a login form posted from
// elsewhere, a change without the session's CSRF token or from another
// origin, a change by a viewer, a GET that would change something; and
// that what it allows is recorded as the person. The approval and cancel
// buttons are not rendered for a viewer.
func TestTheConsoleRefuses(t *testing.T) {
	f := startFixture(t)
	anon := newSession(t, f.url)
	for _, path := range []string{"/runs", "/runs/x", "/approvals", "/fleet", "/live?view=runs", "/runs/x/story"} {
		if status, body := anon.do("GET", path, nil, nil); status != http.StatusUnauthorized || strings.Contains(body, `id="runs"`) {
			t.Errorf("GET %s without a login: status %d, want 401 and no content", path, status)
		}
	}
	if status, _ := anon.do("GET", "/runs", nil, http.Header{"Authorization": {"Bearer not-a-token-of-the-file"}}); status != http.StatusUnauthorized {
		t.Errorf("GET /runs with a wrong bearer token: status %d, want 401", status)
	}
	if status, _ := anon.do("POST", "/login", url.Values{"token": {aliceToken}}, nil); status != http.StatusForbidden {
		t.Errorf("a login posted without the form's CSRF token: status %d, want 403", status)
	}

	paused := f.submit(t, "ask-http", "Finish the notes. [ask]")
	clustertest.WaitPaused(t, f.cl.Client, paused)
	approval := protocol.ApprovalID(paused, 1, 0)

	alice := newSession(t, f.url)
	csrf := alice.signIn(aliceToken)
	changes := []struct {
		name   string
		form   url.Values
		header http.Header
		want   int
	}{
		{"no CSRF token", url.Values{"action": {"approve"}}, nil, http.StatusForbidden},
		{"a wrong CSRF token", url.Values{"action": {"approve"}, "csrf": {strings.Repeat("0", 64)}}, nil, http.StatusForbidden},
		{"another origin", url.Values{"action": {"approve"}, "csrf": {csrf}}, http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
	}
	for _, c := range changes {
		if status, _ := alice.do("POST", "/approvals/"+approval, c.form, c.header); status != c.want {
			t.Errorf("a decision with %s: status %d, want %d", c.name, status, c.want)
		}
	}
	if status, _ := alice.do("GET", "/approvals/"+approval+"?action=approve", nil, nil); status != http.StatusMethodNotAllowed {
		t.Errorf("a decision by GET: status %d, want 405", status)
	}

	// A viewer sees the approval but no button, and is refused a decision
	// even with a good CSRF token.
	bob := newSession(t, f.url)
	bobCSRF := bob.signIn(bobToken)
	_, page := bob.do("GET", "/approvals", nil, nil)
	if !strings.Contains(page, "notes.txt") || strings.Contains(page, `value="approve"`) {
		t.Errorf("the viewer's approvals page shows the approval: %v, its buttons: %v; want the approval without buttons",
			strings.Contains(page, "notes.txt"), strings.Contains(page, `value="approve"`))
	}
	if status, _ := bob.do("POST", "/approvals/"+approval, url.Values{"action": {"approve"}, "csrf": {bobCSRF}}, nil); status != http.StatusForbidden {
		t.Errorf("a viewer's decision: status %d, want 403", status)
	}
	if st, err := f.cl.Run(paused).Status(t.Context()); err != nil || st.Status != protocol.StatusPaused {
		t.Fatalf("after the refused decisions the run is %+v (%v), want paused still", st, err)
	}
	_, page = alice.do("GET", "/approvals", nil, nil)
	if !strings.Contains(page, `value="approve"`) {
		t.Error("the decider's approvals page has no approve button")
	}

	// A bad rewrite is refused before anything is sent; a deny with a
	// reason is recorded as alice.
	if status, body := alice.do("POST", "/approvals/"+approval, url.Values{"action": {"rewrite"}, "rewrite": {"not json"}, "csrf": {csrf}}, nil); status != http.StatusBadRequest || !strings.Contains(body, "JSON object") {
		t.Errorf("a rewrite that is not JSON: status %d, want 400 saying so", status)
	}
	if status, _ := alice.do("POST", "/approvals/"+approval, url.Values{"action": {"deny"}, "reason": {"not today"}, "csrf": {csrf}}, nil); status != http.StatusSeeOther {
		t.Fatalf("alice's denial: status %d, want 303", status)
	}
	st := clustertest.WaitSettled(t, f.cl.Client, paused)
	if st.Outcome != protocol.OutcomeDenied {
		t.Errorf("the denied run ended %s (%s), want denied", st.Outcome, st.Reason)
	}
	aps, err := f.cl.Approvals(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, ap := range aps {
		if ap.ID == approval && (ap.Decision == nil || ap.Decision.By != "console:alice" || ap.Decision.Reason != "not today") {
			t.Errorf("the decision = %+v, want a denial by console:alice for not today", ap.Decision)
		}
	}
	// Deciding again is refused by the coordinator, and says why.
	if status, body := alice.do("POST", "/approvals/"+approval, url.Values{"action": {"approve"}, "csrf": {csrf}}, nil); status != http.StatusConflict {
		t.Errorf("a second decision: status %d (%s), want 409", status, body)
	}

	// A bearer token reads and changes without a session or CSRF token: a
	// page elsewhere cannot make a browser send one.
	bearer := http.Header{"Authorization": {"Bearer " + aliceToken}}
	if status, body := anon.do("GET", "/runs", nil, bearer); status != http.StatusOK || !strings.Contains(body, paused) {
		t.Errorf("GET /runs with a bearer token: status %d, want 200 listing %s", status, paused)
	}
	blocked := f.submit(t, "block-http", "Think for ever. [block]")
	<-f.agent.began
	if status, body := anon.do("POST", "/runs/"+blocked+"/cancel", url.Values{"reason": {"by script"}}, bearer); status != http.StatusOK || !strings.Contains(body, "console:alice") {
		t.Errorf("a cancel with a bearer token: status %d (%s), want 200 by console:alice", status, body)
	}
	if st := clustertest.WaitSettled(t, f.cl.Client, blocked); st.Outcome != protocol.OutcomeCancelled {
		t.Errorf("the run cancelled by bearer ended %s, want cancelled", st.Outcome)
	}

	// Signing out ends the session.
	if status, _ := alice.do("POST", "/logout", url.Values{"csrf": {csrf}}, nil); status != http.StatusSeeOther {
		t.Errorf("sign out: status %d, want 303", status)
	}
	if status, _ := alice.do("GET", "/runs", nil, nil); status != http.StatusUnauthorized {
		t.Errorf("GET /runs after signing out: status %d, want 401", status)
	}
}

// TestApproveWithARewrite approves an action as rewritten, remembered, from
// the console: the run performs the rewritten call, and the decision
// keeps the rewrite, the remember and who made it.
func TestApproveWithARewrite(t *testing.T) {
	f := startFixture(t)
	run := f.submit(t, "rewrite-run", "Finish the notes. [ask]")
	clustertest.WaitPaused(t, f.cl.Client, run)
	alice := newSession(t, f.url)
	csrf := alice.signIn(aliceToken)
	rewrite := `{"path":"notes.txt","search":"draft","replace":"second draft"}`
	status, body := alice.do("POST", "/approvals/"+protocol.ApprovalID(run, 1, 0),
		url.Values{"action": {"rewrite"}, "rewrite": {rewrite}, "remember": {"on"}, "csrf": {csrf}}, nil)
	if status != http.StatusSeeOther {
		t.Fatalf("approve as rewritten: status %d, %s", status, body)
	}
	if st := clustertest.WaitSettled(t, f.cl.Client, run); st.Status != protocol.StatusCompleted {
		t.Errorf("the run ended %s %s (%s), want completed", st.Status, st.Outcome, st.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "notes.txt")); string(b) != "a second draft\n" {
		t.Errorf("notes.txt = %q, want the rewritten edit made", b)
	}
	recs, err := f.cl.Run(run).Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var d *protocol.Decision
	for _, r := range recs {
		if r.Kind == protocol.RecordDecision {
			d = r.Decision
		}
	}
	if d == nil || !d.Approve || !d.Remember || d.By != "console:alice" || string(d.Rewrite) != rewrite {
		t.Errorf("the decision = %+v, want approved, remembered, rewritten, by console:alice", d)
	}
	// The story shows it.
	_, page := alice.do("GET", "/runs/"+run, nil, nil)
	for _, want := range []string{"console:alice", "remembered for the rest of the run", "second draft"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run's page does not say %q", want)
		}
	}
}

// TestTheConsoleOverTLS serves the console with a certificate: its session
// cookie is Secure, and it tells browsers to keep to HTTPS.
func TestTheConsoleOverTLS(t *testing.T) {
	cl := clustertest.Start(t, harness.Config{Roots: []string{t.TempDir()}, Provider: &agent{began: make(chan string, 1)}})
	cc, err := cl.ConsoleClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ca := tlstest.NewCA(t, "console-ca")
	pair := ca.Server(t, "console", "127.0.0.1")
	tokens, err := console.ParseTokens("test", []byte("alice:"+aliceToken+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := console.New(console.Config{Client: cc, Tokens: tokens, CertFile: pair.CertFile, KeyFile: pair.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := console.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	pem, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get("https://" + ln.Addr().String() + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Strict-Transport-Security") == "" {
		t.Error("the console over TLS sends no Strict-Transport-Security")
	}
	for _, ck := range resp.Cookies() {
		if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s: Secure %v HttpOnly %v SameSite %v, want Secure, HttpOnly, Strict", ck.Name, ck.Secure, ck.HttpOnly, ck.SameSite)
		}
	}
	if len(resp.Cookies()) == 0 {
		t.Error("the login page set no cookie")
	}
}
