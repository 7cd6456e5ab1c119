package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/internal/console"
	"github.com/ioharness/harness/pkg/protocol"
)

// The tokens of the tests' token file.
const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef"
)

// agent is the tests' model: it answers each run by a marker in its task,
// at the step the transcript has reached, so runs may interleave.
//
//	[refuse]  reads secret.txt (which the policy denies), then stops
//	[ask]     edits notes.txt (which the policy asks about), then stops
//	[block]   waits until its call is abandoned (a cancel)
//	[spawn]   starts a sub-agent ([child]) that writes child.txt
type agent struct{ began chan string }

func (a *agent) Name() string { return "test-agent" }

func (a *agent) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	all, step := "", 1
	for _, m := range req.Messages {
		all += m.Content
		if m.Role == protocol.RoleAssistant {
			step++
		}
	}
	usage := protocol.Usage{InputTokens: 120, OutputTokens: 30}
	call := func(name, args string) *protocol.Turn {
		return &protocol.Turn{Text: "Looking at the workspace.", Usage: usage,
			ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("c%d", step), Name: name, Arguments: json.RawMessage(args)}}}
	}
	switch {
	case strings.Contains(all, "[block]"):
		select {
		case a.began <- "block":
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	case strings.Contains(all, "[child]") && step == 1:
		return call("write_file", `{"path":"child.txt","content":"ok"}`), nil
	case step > 1:
		return &protocol.Turn{Text: "Done.", Usage: usage}, nil
	case strings.Contains(all, "[spawn]"):
		return call("spawn_agent", `{"goal":"write child.txt [child]","verify_file":"child.txt","verify_contains":"ok","max_steps":2}`), nil
	case strings.Contains(all, "[refuse]"):
		return call("read_file", `{"path":"secret.txt"}`), nil
	case strings.Contains(all, "[ask]"):
		return call("edit_file", `{"path":"notes.txt","search":"draft","replace":"final"}`), nil
	}
	return nil, protocol.Errorf(protocol.CodeProviderRequest, "the test agent has no script for %q", all)
}

// secretContent is secret.txt's: a page that shows it shows a denied read.
const secretContent = "TOPSECRET-7f3a9c"

func contractFor(ws, task string) *protocol.Contract {
	return &protocol.Contract{Task: task, Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}, Sandbox: protocol.SandboxSpec{Backend: "floor"},
		Budget: protocol.Budget{MaxSteps: 5, MaxTokens: 1 << 20},
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Write: "ask", Exec: "deny", Net: "deny"},
			Layers: []protocol.Layer{{Name: "house", Rules: []protocol.Rule{{Act: "read", Effect: "deny", Pattern: "secret.txt"},
				{Act: "write", Effect: "allow", Pattern: "child.txt"}}}}}}
}

// fixture is a cluster with the test agent, and a console on it.
type fixture struct {
	cl    *harness.Cluster
	ws    string
	agent *agent
	url   string
}

func startFixture(t *testing.T) *fixture {
	t.Helper()
	ws := t.TempDir()
	for name, content := range map[string]string{"secret.txt": secretContent + "\n", "notes.txt": "a draft\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := &agent{began: make(chan string, 1)}
	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: a, AllowFloor: true})
	cc, err := cl.ConsoleClient(t.Context())
	if err != nil {
		t.Fatalf("connect the console as its own user: %v", err)
	}
	t.Cleanup(cc.Close)
	tokens, err := console.ParseTokens("test", []byte("alice:"+aliceToken+"\nbob:"+bobToken+":viewer\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := console.New(console.Config{Client: cc, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := console.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("console.Serve: %v", err)
		}
		srv.Close()
	})
	return &fixture{cl: cl, ws: ws, agent: a, url: "http://" + ln.Addr().String()}
}

func (f *fixture) submit(t *testing.T, id, task string) string {
	t.Helper()
	c := contractFor(f.ws, task)
	if strings.Contains(task, "[spawn]") {
		c.Budget.Tree = &protocol.TreeBudget{MaxAgents: 2, MaxSteps: 10}
	}
	h, err := f.cl.Submit(t.Context(), c, harness.WithRunID(id))
	if err != nil {
		t.Fatalf("submit %s: %v", id, err)
	}
	return h.ID()
}

// browser starts a headless Chromium for the test. Without one the test
// skips, saying how to install it, unless HARNESS_REQUIRE_BROWSER=1 or
// CI=true, where a missing browser fails it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		msg := "no Chromium on PATH for the console's browser tests: install it with apt-get install -y chromium (scripts/test does)"
		if os.Getenv("HARNESS_REQUIRE_BROWSER") == "1" || os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	return bctx
}

// artifacts is where the tests' screenshots go: $HARNESS_ARTIFACTS/console,
// or a directory of the system's temporary one that outlives the test.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := ""
	if base := os.Getenv("HARNESS_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		var err error
		if dir, err = os.MkdirTemp("", "harness-console-screenshots-"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// do runs browser actions with a deadline, failing the test with what
// was being done.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one browser action that gives a value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return get(t, ctx, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// navigate opens url and returns the HTTP status it answered with.
func navigate(t *testing.T, ctx context.Context, url string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(url))
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return resp.Status
}

// TestConsoleInABrowser drives the console in a real headless Chromium
// against an embedded cluster: a page without a login is refused; signed
// in, a run appears in the list as it starts, with no reload; its
// timeline shows the refused read with its rule and layer and never the
// file; an approval decided on the page carries its run on, recorded as
// the person; a cancel from a run's page ends it cancelled; and a forged
// change, from a page elsewhere or without the CSRF token, is refused
// and changes nothing. It writes a screenshot of each page.
func TestConsoleInABrowser(t *testing.T) {
	ctx := browser(t)
	f := startFixture(t)
	dir := artifacts(t)

	// No login: the page is refused (401) and shows the sign-in form,
	// not the runs.
	if status := navigate(t, ctx, f.url+"/runs"); status != http.StatusUnauthorized {
		t.Errorf("/runs without a login: status %d, want 401", status)
	}
	hasRuns := get(t, ctx, "look for the runs", chromedp.Evaluate[bool](`document.getElementById("runs") !== null`))
	hasLogin := get(t, ctx, "look for the login form", chromedp.Evaluate[bool](`document.querySelector("form[action='/login'] input[name=token]") !== null`))
	if hasRuns || !hasLogin {
		t.Errorf("/runs without a login shows the runs: %v, the login form: %v; want only the form", hasRuns, hasLogin)
	}
	shot(t, ctx, dir, "login.png")

	// Sign in as alice, a decider: the form takes us to the runs.
	do(t, ctx, "sign in",
		chromedp.SendKeys(chromedp.CSS("#token"), aliceToken),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#live"))) // the page's event stream is open
	get(t, ctx, "mark the page", chromedp.Evaluate[bool](`window.notReloaded = true`))

	// A run appears live.
	refused := f.submit(t, "refuse-run", "Read the notes. [refuse]")
	do(t, ctx, "wait for the run's row", chromedp.WaitVisible(chromedp.ID("run-"+refused)))
	if !get(t, ctx, "check the page was not reloaded", chromedp.Evaluate[bool](`window.notReloaded === true`)) {
		t.Error("the runs page reloaded to show the new run; want it added by the event stream")
	}
	clustertest.WaitSettled(t, f.cl.Client, refused)
	do(t, ctx, "wait for the row to say completed", chromedp.WaitVisible(chromedp.CSS(`#run-`+refused+` .state.completed`)))
	shot(t, ctx, dir, "runs.png")

	// Its timeline shows the refused call with the rule and layer that
	// refused it, and not what the file holds.
	do(t, ctx, "open the run", chromedp.Click(chromedp.CSS(`#run-`+refused+` a`)), chromedp.WaitVisible(chromedp.CSS(".timeline")))
	call := strings.ToLower(text(t, ctx, ".call.refused")) // the verdict is upper case on the page
	for _, want := range []string{"read_file", "secret.txt", "deny", "rule secret.txt", "layer house", "refused: nothing ran"} {
		if !strings.Contains(call, want) {
			t.Errorf("the refused call reads %q; want it to say %q", call, want)
		}
	}
	page := get(t, ctx, "read the page", chromedp.OuterHTML(chromedp.CSS("html")))
	if strings.Contains(page, secretContent) {
		t.Errorf("the run's page shows the content of the denied read (%s)", secretContent)
	}
	shot(t, ctx, dir, "run.png")
	do(t, ctx, "narrow the window", chromedp.EmulateViewport(390, 844))
	shot(t, ctx, dir, "run-narrow.png")
	do(t, ctx, "what the model was sent", chromedp.Click(chromedp.CSS(`a.request`)), chromedp.WaitVisible(chromedp.CSS(".message.system")))
	shot(t, ctx, dir, "request-narrow.png")
	do(t, ctx, "widen the window", chromedp.EmulateViewport(1280, 900))

	// A run with a sub-agent: its page draws the tree, each run a link.
	parent := f.submit(t, "spawn-run", "Split the work. [spawn]")
	clustertest.WaitSettled(t, f.cl.Client, parent)
	do(t, ctx, "open the parent", chromedp.Navigate(f.url+"/runs/"+parent), chromedp.WaitVisible(chromedp.CSS("ul.tree li li a")))
	shot(t, ctx, dir, "run-tree.png")
	child := text(t, ctx, "ul.tree li li a")
	do(t, ctx, "open the sub-agent from the tree", chromedp.Click(chromedp.CSS("ul.tree li li a")), chromedp.WaitVisible(chromedp.CSS("ul.tree li.current")))
	if here := get(t, ctx, "where the tree led", chromedp.Location()); !strings.HasSuffix(here, "/runs/"+child) {
		t.Errorf("the sub-agent's link led to %s, want /runs/%s", here, child)
	}
	if cur := text(t, ctx, "ul.tree li.current > a"); cur != child {
		t.Errorf("the sub-agent's page marks %q in the tree, want %q", cur, child)
	}
	if st, err := f.cl.Run(child).Status(t.Context()); err != nil || st.Parent != parent {
		t.Errorf("the tree's sub-agent %s: %+v, %v; want a sub-agent of %s", child, st, err, parent)
	}

	// An approval decided from the page carries the run on.
	asked := f.submit(t, "ask-run", "Finish the notes. [ask]")
	clustertest.WaitPaused(t, f.cl.Client, asked)
	approval := protocol.ApprovalID(asked, 1, 0)
	do(t, ctx, "open the approvals", chromedp.Navigate(f.url+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#ap-"+strings.ReplaceAll(approval, ".", `\.`))))
	shown := text(t, ctx, "#approvals")
	for _, want := range []string{"notes.txt", "- draft", "+ final", "Approve", "Deny"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the approval reads %q; want it to show %q", shown, want)
		}
	}
	shot(t, ctx, dir, "approvals.png")
	do(t, ctx, "narrow the window", chromedp.EmulateViewport(390, 844))
	shot(t, ctx, dir, "approvals-narrow.png")
	do(t, ctx, "widen the window", chromedp.EmulateViewport(1280, 900))
	do(t, ctx, "approve", chromedp.Click(chromedp.CSS(`button[name=action][value=approve]`)),
		chromedp.WaitVisible(chromedp.CSS("#decided")))
	st := clustertest.WaitSettled(t, f.cl.Client, asked)
	if st.Status != protocol.StatusCompleted {
		t.Errorf("the approved run ended %s %s (%s), want completed", st.Status, st.Outcome, st.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "notes.txt")); string(b) != "a final\n" {
		t.Errorf("notes.txt = %q after the approval, want the edit made", b)
	}
	recs, err := f.cl.Run(asked).Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	by := ""
	for _, r := range recs {
		if r.Kind == protocol.RecordDecision && r.Decision != nil {
			by = r.Decision.By
		}
	}
	if by != "console:alice" {
		t.Errorf("the decision is recorded as made by %q, want console:alice", by)
	}

	// A run that waits on its model, cancelled from its page.
	blocked := f.submit(t, "block-run", "Think for ever. [block]")
	<-f.agent.began
	do(t, ctx, "open the running run", chromedp.Navigate(f.url+"/runs/"+blocked), chromedp.WaitVisible(chromedp.CSS("#cancel")),
		chromedp.WaitVisible(chromedp.CSS("#live")))

	// A forged change is refused: first a page elsewhere that posts a
	// cancel to the console (the browser sends the session cookie, since
	// the site is the same, but not the CSRF token)...
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form method="post" action="%s/runs/%s/cancel"><input name="reason" value="forged"></form><script>document.forms[0].submit()</script>`, f.url, blocked)
	}))
	defer evil.Close()
	navigate(t, ctx, evil.URL)
	do(t, ctx, "wait for the forged post's answer", chromedp.WaitVisible(chromedp.CSS("section.failure")))
	landed := get(t, ctx, "where the forged post landed", chromedp.Location())
	body := text(t, ctx, "body")
	if !strings.Contains(landed, "/cancel") || !strings.Contains(body, "Refused") {
		t.Errorf("the forged post from %s landed on %s saying %q; want the console's refusal", evil.URL, landed, body)
	}
	shot(t, ctx, dir, "forged.png")
	// ...then a script of the console's own origin that leaves the token out.
	do(t, ctx, "back to the run", chromedp.Navigate(f.url+"/runs/"+blocked), chromedp.WaitVisible(chromedp.CSS("#cancel")))
	status := get(t, ctx, "post without the CSRF token", chromedp.Evaluate[int](
		`fetch(location.pathname + "/cancel", {method: "POST", body: new URLSearchParams({reason: "no token"})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	if status != http.StatusForbidden {
		t.Errorf("a cancel without the CSRF token: status %d, want 403", status)
	}
	if st, err := f.cl.Run(blocked).Status(t.Context()); err != nil || st.Status != protocol.StatusRunning {
		t.Fatalf("after the forged cancels the run is %v (%v), want running still", st, err)
	}

	// The real cancel, from the page.
	shot(t, ctx, dir, "run-running.png")
	do(t, ctx, "cancel", chromedp.SendKeys(chromedp.CSS(`#cancel input[name=reason]`), "wrong branch"),
		chromedp.Click(chromedp.CSS(`#cancel button`)), chromedp.WaitVisible(chromedp.CSS(".note")))
	st = clustertest.WaitSettled(t, f.cl.Client, blocked)
	if st.Outcome != protocol.OutcomeCancelled || !strings.Contains(st.Reason, "console:alice") || !strings.Contains(st.Reason, "wrong branch") {
		t.Errorf("after the cancel the run is %s %s (%s), want cancelled by console:alice: wrong branch", st.Status, st.Outcome, st.Reason)
	}
	do(t, ctx, "wait for the page to say cancelled", chromedp.WaitVisible(chromedp.CSS(`.entry.finished`)))
	if got := text(t, ctx, ".entry.finished"); !strings.Contains(got, "cancelled") {
		t.Errorf("the finished entry reads %q, want cancelled", got)
	}
	shot(t, ctx, dir, "run-cancelled.png")

	// The fleet.
	do(t, ctx, "open the fleet", chromedp.Navigate(f.url+"/fleet"), chromedp.WaitVisible(chromedp.CSS("figure.chart svg")))
	fleet := text(t, ctx, "main")
	for _, want := range []string{"coordinator", "worker", "sandboxer", "default", "workspaces open"} {
		if !strings.Contains(fleet, want) {
			t.Errorf("the fleet page reads %q; want it to list %q", fleet, want)
		}
	}
	if strings.Contains(fleet, f.ws) {
		t.Errorf("the fleet page shows the sandboxer's roots (%s); it shows only what an instance serves", f.ws)
	}
	shot(t, ctx, dir, "fleet.png")
	do(t, ctx, "open the runs", chromedp.Navigate(f.url+"/runs"), chromedp.WaitVisible(chromedp.CSS("#runs")))
	shot(t, ctx, dir, "runs-all.png")
	do(t, ctx, "narrow the window", chromedp.EmulateViewport(390, 844))
	shot(t, ctx, dir, "runs-narrow.png")
}
