package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// page is what the layout renders around a page's content.
type page struct {
	Title string
	Nav   string // runs, approvals, fleet
	V     *viewer
	View  string // what the page's script listens for: runs, run, approvals
	Live  string // its event stream, "" for none
	Data  any
}

func funcs() template.FuncMap {
	return template.FuncMap{
		"pathEscape": url.PathEscape,
		"time":       func(t interface{ Format(string) string }) string { return t.Format("15:04:05") },
		"lower":      strings.ToLower,
	}
}

func (s *Server) render(w http.ResponseWriter, status int, name string, p page) {
	var b bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		s.log.Error("render a page", "page", name, "err", err)
		http.Error(w, "500: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fragment renders one named template of a page alone, for the scripts
// that replace a part of a page when it changes.
func (s *Server) fragment(w http.ResponseWriter, name, tmpl string, data any) {
	var b bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&b, tmpl, data); err != nil {
		s.log.Error("render a fragment", "page", name, "err", err)
		http.Error(w, "500: the fragment could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, v *viewer, status int, msg string) {
	if r.Header.Get("Accept") == "application/json" || v == nil || v.Bearer {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(strconv.Itoa(status) + " " + msg + "\n"))
		return
	}
	s.render(w, status, "error", page{Title: http.StatusText(status), V: v, Data: map[string]any{"Status": status, "Message": msg}})
}

// statusFor is the HTTP status of an error the cluster gave.
func statusFor(err error) int {
	var pe *protocol.Error
	switch {
	case errors.Is(err, protocol.ErrUnknownRun), errors.Is(err, protocol.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, protocol.ErrRunFinished):
		return http.StatusConflict
	case errors.Is(err, protocol.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.As(err, &pe) && (pe.Code == protocol.CodeInvalidField || pe.Code == protocol.CodeMalformed):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// message is what a person reads of an error: a protocol error's own
// message, which says what to do.
func message(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if v := s.who(r); v != nil {
		http.Redirect(w, r, localNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	s.renderLogin(w, http.StatusOK, r.URL.Query().Get("next"), "")
}

func (s *Server) renderLogin(w http.ResponseWriter, status int, next, msg string) {
	token := secret()
	s.setCookie(w, loginCookie, token, 600)
	s.render(w, status, "login", page{Title: "Sign in", Data: map[string]string{"Next": localNext(next), "CSRF": token, "Message": msg}})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	c, err := r.Cookie(loginCookie)
	form := r.PostFormValue("login_csrf")
	if err != nil || c.Value == "" || form == "" || c.Value != form {
		s.log.Warn("login refused: no login CSRF token", "remote", r.RemoteAddr)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("403 refused: the sign-in form's CSRF token is missing or wrong; open /login and sign in again\n"))
		return
	}
	p := s.cfg.Tokens.Lookup(strings.TrimSpace(r.PostFormValue("token")))
	if p == nil {
		s.log.Warn("login refused: unknown token", "remote", r.RemoteAddr)
		s.renderLogin(w, http.StatusUnauthorized, r.PostFormValue("next"), "That token is not in the console's token file.")
		return
	}
	id, _ := s.sessions.open(p)
	s.setCookie(w, sessionCookie, id, int(SessionTTL.Seconds()))
	s.setCookie(w, loginCookie, "", -1)
	s.log.Info("signed in", "principal", p.Name, "role", p.Role, "remote", r.RemoteAddr)
	http.Redirect(w, r, localNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, v *viewer) {
	if why := checkChange(r, v); why != "" {
		s.fail(w, r, v, http.StatusForbidden, "Refused: "+why+".")
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sessions.close(c.Value)
	}
	s.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// localNext keeps a redirect after signing in on the console itself.
func localNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.HasPrefix(next, "/login") {
		return "/runs"
	}
	return next
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !slices.Contains(states, state) {
		state = ""
	}
	data := s.runsView(r.Context(), state, q.Get("q"))
	s.render(w, http.StatusOK, "runs", page{Title: "Runs", Nav: "runs", V: v, View: "runs", Live: "/live?view=runs", Data: data})
}

func (s *Server) runPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("run")
	if !protocol.ValidToken(id) {
		s.fail(w, r, v, http.StatusNotFound, "There is no run "+id+".")
		return
	}
	rv, err := s.runView(r.Context(), id, v)
	if err != nil {
		s.fail(w, r, v, statusFor(err), message(err))
		return
	}
	switch r.URL.Query().Get("note") {
	case "cancelled":
		rv.Note = "The cancel is recorded as " + v.P.Recorded() + "; the run ends cancelled."
	}
	s.render(w, http.StatusOK, "run", page{Title: "Run " + id, Nav: "runs", V: v, View: "run", Live: "/live?view=run&run=" + url.QueryEscape(id), Data: rv})
}

func (s *Server) storyFragment(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("run")
	if !protocol.ValidToken(id) {
		http.Error(w, "404: no such run", http.StatusNotFound)
		return
	}
	rv, err := s.runView(r.Context(), id, v)
	if err != nil {
		http.Error(w, strconv.Itoa(statusFor(err))+": "+message(err), statusFor(err))
		return
	}
	s.fragment(w, "run", "story", rv)
}

func (s *Server) requestPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("run")
	step, err := strconv.Atoi(r.PathValue("step"))
	if !protocol.ValidToken(id) || err != nil || step < 1 {
		s.fail(w, r, v, http.StatusNotFound, "Give a run and a step number, 1 or more.")
		return
	}
	req, asm, err := s.cfg.Client.Run(id).Request(r.Context(), step)
	if err != nil {
		s.fail(w, r, v, statusFor(err), message(err))
		return
	}
	s.render(w, http.StatusOK, "request", page{Title: "Step " + strconv.Itoa(step) + " of " + id, Nav: "runs", V: v, Data: requestViewOf(id, step, req, asm)})
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("run")
	if !protocol.ValidToken(id) {
		s.fail(w, r, v, http.StatusNotFound, "There is no run "+id+".")
		return
	}
	reason := oneLine(r.PostFormValue("reason"), 500)
	if reason == "" {
		reason = "cancelled from the console"
	}
	c, err := s.cfg.Client.Run(id).Cancel(r.Context(), v.P.Recorded(), reason)
	if err != nil {
		s.fail(w, r, v, statusFor(err), message(err))
		return
	}
	s.log.Info("run cancelled", "run", id, "by", c.By)
	if v.Bearer {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"?note=cancelled", http.StatusSeeOther)
}

func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	data := s.approvalsView(r.Context())
	if id := r.URL.Query().Get("decided"); id != "" {
		if _, _, _, err := protocol.ParseApprovalID(id); err == nil {
			data.Note = "Your decision on " + id + " is recorded as " + v.P.Recorded() + "."
		}
	}
	if r.URL.Query().Get("fragment") == "1" {
		s.fragment(w, "approvals", "pending", page{V: v, Data: data})
		return
	}
	s.render(w, http.StatusOK, "approvals", page{Title: "Approvals", Nav: "approvals", V: v, View: "approvals", Live: "/live?view=approvals", Data: data})
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, v *viewer) {
	id := r.PathValue("id")
	d := &protocol.Decision{By: v.P.Recorded(), Time: s.now().UTC()}
	switch r.PostFormValue("action") {
	case "approve":
		d.Approve = true
	case "rewrite":
		d.Approve = true
		raw := strings.TrimSpace(r.PostFormValue("rewrite"))
		var obj map[string]any
		if raw == "" || json.Unmarshal([]byte(raw), &obj) != nil {
			s.fail(w, r, v, http.StatusBadRequest, `The rewrite is not a JSON object; give the call's new arguments, such as {"path":"a.go","content":"..."}.`)
			return
		}
		d.Rewrite = json.RawMessage(raw)
	case "deny":
		d.Reason = oneLine(r.PostFormValue("reason"), 1000)
		if d.Reason == "" {
			d.Reason = "denied from the console"
		}
	default:
		s.fail(w, r, v, http.StatusBadRequest, "Say approve, rewrite or deny.")
		return
	}
	d.Remember = d.Approve && r.PostFormValue("remember") != ""
	ap, err := decideOverNATS(r.Context(), s.cfg.Client, id, d)
	if err != nil {
		s.fail(w, r, v, statusFor(err), message(err))
		return
	}
	s.log.Info("decision recorded", "approval", id, "approve", d.Approve, "by", d.By)
	if v.Bearer {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ap)
		return
	}
	http.Redirect(w, r, "/approvals?decided="+url.QueryEscape(id), http.StatusSeeOther)
}

func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	s.render(w, http.StatusOK, "fleet", page{Title: "Fleet", Nav: "fleet", V: v, Data: s.fleetView(r.Context())})
}
