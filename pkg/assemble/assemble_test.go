package assemble

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/ioharness/harness/pkg/protocol"
)

// fill is n bytes of text that says what it is.
func fill(tag string, n int) string {
	line := tag + " line of text\n"
	s := strings.Repeat(line, n/len(line)+1)
	return s[:n]
}

// checkOutput checks what holds of every assembly: the task first, every
// call answered once, and the estimate what the request marshals to.
func checkOutput(t *testing.T, in Input, out Output) {
	t.Helper()
	if len(out.Messages) == 0 || out.Messages[0].Role != protocol.RoleUser || out.Messages[0].Content != in.Task {
		t.Fatalf("the first message is not the task:\n%s", contents(out.Messages))
	}
	if err := checkPairs(out.Messages); err != nil {
		t.Fatalf("%v in\n%s", err, contents(out.Messages))
	}
	req := request(t, in, out.Messages)
	if got, want := out.Stats.Estimate, Tokens(len(req), in.BytesPerToken)+in.Output; got != want || out.Stats.Bytes != len(req) {
		t.Errorf("Estimate = %d of %d bytes, want %d of %d: the request's marshalled size", got, out.Stats.Bytes, want, len(req))
	}
}

func TestFullTranscriptWhenItFits(t *testing.T) {
	steps := []Step{
		st(1, "Looking.", rd("c1", "a.go", "package a\n"), gr("c2", "TODO", "a.go:3: TODO")),
		st(2, "", wr("c3", "b.go")),
		st(3, "Checking.", rd("c4", "a.go", "package a // new\n"), ex("c5", []string{"go", "test", "./..."}, "ok")),
		st(4, "Done?", ex("c6", []string{"go", "vet"}, "")),
	}
	steps[1].After = []protocol.Message{{Role: protocol.RoleUser, Content: "You have 3 steps left."}}
	in := Input{System: "sys", Task: "Fix a.go.", Steps: steps, Budget: 100_000, Output: 4096}
	out := Assemble(in)
	checkOutput(t, in, out)

	want := []protocol.Message{{Role: protocol.RoleUser, Content: "Fix a.go."}}
	for _, s := range steps {
		want = append(want, s.Turn)
		for i, r := range s.Results {
			c := r.Content
			if c == "" {
				c = "(no output)"
			}
			want = append(want, protocol.Message{Role: protocol.RoleTool, ToolCallID: s.Turn.ToolCalls[i].ID, Content: c})
		}
		want = append(want, s.After...)
	}
	if diff := cmp.Diff(want, out.Messages); diff != "" {
		t.Errorf("Assemble under no pressure is not the full transcript (-want +got):\n%s", diff)
	}
	if out.Stats.Carried != 6 || out.Stats.Stubbed+out.Stats.Superseded+out.Stats.Collapsed+out.Stats.Reread != 0 || out.Stale != nil {
		t.Errorf("Stats = %+v, Stale = %v; want 6 carried and nothing else", out.Stats, out.Stale)
	}

	// Turn to turn the messages only grow at the end: a prefix cache holds.
	var prev []protocol.Message
	for k := 0; k <= len(steps); k++ {
		in.Steps = steps[:k]
		got := Assemble(in).Messages
		if len(prev) > 0 && !reflect.DeepEqual(got[:len(prev)], prev) {
			t.Fatalf("the request for step %d does not begin with the one for step %d:\n%s\nvs\n%s", k+1, k, contents(got), contents(prev))
		}
		prev = got
	}
}

// pressed is the input of the pressure tests: a budget of 1,000 tokens
// (2,000-char entries, a soft limit of 3,800 bytes) and no output
// reservation.
func pressed(steps ...Step) Input {
	return Input{Task: "Fix it.", Steps: steps, Budget: 1000}
}

func TestSupersession(t *testing.T) {
	in := pressed(
		st(1, "", ex("e1", []string{"go", "test"}, fill("e", 1990))),
		st(2, "", rd("r1", "a.go", fill("a1", 300)), gr("g1", "TODO", fill("g1", 200)),
			mkop("w1", "write_file", map[string]string{"path": "b.go", "content": "x"}, fill("w1", 300))),
		st(3, "", rd("r2", "./x/../a.go", fill("a2", 300)), gr("g2", "TODO", fill("g2", 200)),
			mkop("w2", "edit_file", map[string]string{"path": "b.go", "search": "x", "replace": "y"}, fill("w2", 300))),
		st(4, "", rd("r3", "c.go", fill("c", 300)), failed(rd("r4", "c.go", "permission denied"))),
		st(5, "", ex("e2", []string{"go", "test"}, "ok")),
	)
	out := Assemble(in)
	checkOutput(t, in, out)
	for id, want := range map[string]string{
		"r1": "[superseded by the read of a.go at step 3]",
		"g1": `[superseded by the grep for "TODO" at step 3]`,
		"w1": "[superseded by the write to b.go at step 3]",
		"r2": fill("a2", 300),
		"g2": fill("g2", 200),
		"r3": fill("c", 300), // an error does not supersede
		// An exec is never superseded: the older one is elided for room.
		"e1": "[elided: the output of `go test` at step 1]",
	} {
		if got := toolContent(t, out.Messages, id); got != want {
			t.Errorf("result %s = %.80q, want %q", id, got, want)
		}
	}
	if out.Stats.Superseded != 3 {
		t.Errorf("Stats.Superseded = %d, want 3", out.Stats.Superseded)
	}

	// Without pressure nothing is superseded.
	in.Budget = 50_000
	if got := toolContent(t, Assemble(in).Messages, "r1"); got != fill("a1", 300) {
		t.Errorf("result r1 with room = %.60q, want it whole", got)
	}
}

func TestInvalidationAndReread(t *testing.T) {
	big := fill("out", 1990)
	steps := []Step{
		st(1, "", ex("e1", []string{"make"}, big)),
		st(2, "", rd("r1", "a.go", "package a\n"), rd("r2", "b.go", "package b\n")),
		st(3, "", mkop("w1", "edit_file", map[string]string{"path": "a.go", "search": "a", "replace": "b"}, "edited a.go"),
			failed(wr("w2", "b.go"))),
		st(4, "", ex("e2", []string{"make"}, big)),
	}
	stub := "[a.go was written at step 3 after this read; read it again if you need it]"
	tests := []struct {
		name    string
		fresh   map[string]string
		rec     *string // r1's recorded re-read
		readAt  int
		content string
		stale   []Stale
		reread  int
	}{
		{name: "reported", content: stub, stale: []Stale{{CallID: "r1", Path: "a.go", Step: 2, WrittenAt: 3}}},
		{name: "read again", fresh: map[string]string{"r1": "package b\n", "zz": "unused"}, content: "package b\n", reread: 1},
		{name: "recorded after the write", rec: ptr("package b // v2\n"), readAt: 4, content: "package b // v2\n"},
		{name: "recorded before the write", rec: ptr("package a // v0\n"), readAt: 3, content: stub,
			stale: []Stale{{CallID: "r1", Path: "a.go", Step: 2, WrittenAt: 3}}},
		{name: "recorded, then read again", rec: ptr("v0"), readAt: 1, fresh: map[string]string{"r1": "v3"}, content: "v3", reread: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := slices.Clone(steps)
			s[1].Results = slices.Clone(s[1].Results)
			s[1].Results[0].Fresh, s[1].Results[0].ReadAt = tt.rec, tt.readAt
			in := pressed(s...)
			in.Fresh = tt.fresh
			out := Assemble(in)
			checkOutput(t, in, out)
			if got := toolContent(t, out.Messages, "r1"); got != tt.content {
				t.Errorf("result r1 = %q, want %q", got, tt.content)
			}
			if got := toolContent(t, out.Messages, "r2"); got != "package b\n" {
				t.Errorf("result r2 = %q, want it whole: a failed write invalidates nothing", got)
			}
			if diff := cmp.Diff(tt.stale, out.Stale); diff != "" {
				t.Errorf("Stale (-want +got):\n%s", diff)
			}
			if out.Stats.Reread != tt.reread {
				t.Errorf("Stats.Reread = %d, want %d", out.Stats.Reread, tt.reread)
			}
			// The caller reads the reported ones again: nothing more to read.
			if len(out.Stale) > 0 {
				in.Fresh = map[string]string{}
				for _, x := range out.Stale {
					in.Fresh[x.CallID] = "now"
				}
				if again := Assemble(in); again.Stale != nil || toolContent(t, again.Messages, "r1") != "now" {
					t.Errorf("after reading %v again, Stale = %v and r1 = %q", out.Stale, again.Stale, toolContent(t, again.Messages, "r1"))
				}
			}
		})
	}

	// A stale read the fit does not carry is elided, not reported.
	s := slices.Clone(steps)
	s[1] = st(2, "", rd("r1", "a.go", fill("a", 1900)), rd("r2", "b.go", "package b\n"))
	in := pressed(s...)
	out := Assemble(in)
	checkOutput(t, in, out)
	if got := toolContent(t, out.Messages, "r1"); out.Stale != nil || got != "[elided: the read of a.go at step 2; read it again if you need it]" {
		t.Errorf("a stale read with no room: r1 = %q, Stale = %v; want it elided and not reported", got, out.Stale)
	}
}

func ptr(s string) *string { return &s }

func TestFitNewestFirst(t *testing.T) {
	in := pressed(
		st(1, "", rd("r1", "small.go", "package small\n")),
		st(2, "", rd("r2", "a.go", fill("a", 1500))),
		st(3, "", ex("e1", []string{"go", "test", "./..."}, fill("fail", 1500))),
		st(4, "", gr("g1", "func", fill("g", 1500))),
		st(5, "", ex("e2", []string{"go", "build"}, "ok")),
	)
	out := Assemble(in)
	checkOutput(t, in, out)
	for id, want := range map[string]string{
		"g1": fill("g", 1500), // the newest fits
		"e1": "[elided: the output of `go test ./...` at step 3]",
		"r2": "[elided: the read of a.go at step 2; read it again if you need it]",
		"r1": "package small\n", // smaller whole than as a stub
	} {
		if got := toolContent(t, out.Messages, id); got != want {
			t.Errorf("result %s = %.80q, want %.80q", id, got, want)
		}
	}
	if out.Stats.Carried != 3 || out.Stats.Stubbed != 2 {
		t.Errorf("Stats = %+v, want 3 carried and 2 stubbed", out.Stats)
	}
	if got := Tokens(len(request(t, in, out.Messages)), 0); got > in.Budget*95/100 {
		t.Errorf("the request is %d tokens, over 95%% of %d", got, in.Budget)
	}
	// The turns and their calls are all kept.
	turns := 0
	for _, m := range out.Messages {
		if m.Role == protocol.RoleAssistant {
			turns++
		}
	}
	if turns != 5 {
		t.Errorf("%d turns kept, want 5", turns)
	}
}

func TestElidedStubs(t *testing.T) {
	img := protocol.Message{Role: protocol.RoleUser, Content: "The images you asked to view:", Images: []protocol.Image{{MediaType: "image/png", Data: make([]byte, 3000)}}}
	out := fill("out", 300) // more than a stub
	s1 := st(1, "",
		mkop("v1", "view_image", map[string]string{"path": "shot.png"}, out),
		mkop("f1", "find", map[string]string{"name_glob": "*.md"}, out),
		mkop("g1", "grep", map[string]string{"pattern": "x", "path_glob": "*.go"}, out),
		mkop("k1", "spawn_agent", map[string]string{"goal": "fix b"}, out),
		mkop("m1", "mcp__gh__search", map[string]string{"q": "bug"}, out),
		mkop("w1", "write_file", map[string]string{"path": "a.go", "content": "x"}, out),
		mkop("t1", "git_status", nil, "M a.go"), // smaller whole than as a stub: whole
	)
	s1.After = []protocol.Message{img}
	in := pressed(s1, st(2, "", ex("e1", []string{"make"}, fill("x", 1990))), st(3, "", ex("e2", []string{"make"}, fill("y", 1990))))
	in.Budget = 1600 // room for the last two steps only
	got := Assemble(in)
	checkOutput(t, in, got)
	if c := toolContent(t, got.Messages, "t1"); c != "M a.go" {
		t.Errorf("result t1 = %q, want it whole", c)
	}
	for id, want := range map[string]string{
		"v1": "[elided: the view of shot.png at step 1; view it again if you need it]",
		"f1": `[elided: the find of "*.md" at step 1; search again if you need it]`,
		"g1": `[elided: the grep for "x" in "*.go" at step 1; search again if you need it]`,
		"k1": `[elided: the report of the sub-agent for "fix b" at step 1]`,
		"m1": "[elided: the result of mcp__gh__search at step 1]",
		"w1": "[elided: the write to a.go at step 1]",
	} {
		if c := toolContent(t, got.Messages, id); c != want {
			t.Errorf("result %s = %q, want %q", id, c, want)
		}
	}
	for _, m := range got.Messages {
		if len(m.Images) > 0 {
			t.Errorf("an elided step's images were carried: %q", m.Content)
		}
		if m.Content == "[elided: the images viewed at step 1; view them again if you need them]" {
			return
		}
	}
	t.Errorf("no stub stands for step 1's images:\n%s", contents(got.Messages))
}

func TestCollapse(t *testing.T) {
	var steps []Step
	for i := 1; i <= 60; i++ {
		steps = append(steps, st(i, "", rd("r"+itoa(i), "f"+itoa(i)+".go", fill("f", 1500))))
	}
	in := Input{Task: "Read everything.", Steps: steps, Budget: 8000}
	out := Assemble(in)
	checkOutput(t, in, out)
	if out.Stats.Collapsed == 0 {
		t.Fatalf("nothing collapsed: %+v\n%s", out.Stats, contents(out.Messages))
	}
	c := out.Stats.Collapsed
	want := "[steps 1–" + itoa(c) + " elided: " + itoa(c) + " tool results; read again what you need]"
	if out.Messages[1].Role != protocol.RoleUser || out.Messages[1].Content != want {
		t.Errorf("message 1 = %q, want %q", out.Messages[1].Content, want)
	}
	if out.Messages[2].Role != protocol.RoleAssistant || out.Messages[2].ToolCalls[0].ID != "r"+itoa(c+1) {
		t.Errorf("message 2 is not step %d's turn:\n%s", c+1, contents(out.Messages[:4]))
	}
	stubs := 0
	for _, m := range out.Messages {
		if m.Role == protocol.RoleTool && strings.HasPrefix(m.Content, "[elided") {
			stubs += len(mustJSON(m)) + 1
		}
	}
	if limit := maxBytes(in.Budget/8, 4); stubs > limit {
		t.Errorf("after collapsing %d steps the stubs are %d bytes, over %d", c, stubs, limit)
	}
	if out.Stats.Stubbed+out.Stats.Carried != 60 {
		t.Errorf("Stats = %+v: stubbed and carried are not the 60 results", out.Stats)
	}

	// Under the threshold nothing collapses.
	in.Steps = steps[:25]
	if got := Assemble(in); got.Stats.Collapsed != 0 || got.Stats.Stubbed == 0 {
		t.Errorf("25 steps: Stats = %+v, want stubs and no collapse", got.Stats)
	}
}

func TestCollapseToFit(t *testing.T) {
	// Turns with long text, kept when their results go, outgrow the budget:
	// the oldest steps collapse until they fit.
	var steps []Step
	for i := 1; i <= 40; i++ {
		steps = append(steps, st(i, fill("thought", 400), ex("e"+itoa(i), []string{"ls"}, "a.go")))
	}
	in := Input{Task: "List.", Steps: steps, Budget: 3000, Output: 500}
	out := Assemble(in)
	checkOutput(t, in, out)
	if out.Stats.Collapsed == 0 || out.Stats.Estimate > in.Budget {
		t.Errorf("Stats = %+v: want steps collapsed and the estimate within %d", out.Stats, in.Budget)
	}
	if !strings.HasPrefix(out.Messages[1].Content, "[steps 1–") {
		t.Errorf("message 1 = %q, want the collapse line", out.Messages[1].Content)
	}
}

func TestNotesQuarter(t *testing.T) {
	var notes []protocol.Note
	for i := 1; i <= 10; i++ {
		notes = append(notes, protocol.Note{Key: "k" + itoa(i), Value: fill("note"+itoa(i), 600)})
	}
	tests := []struct {
		name   string
		notes  []protocol.Note
		budget int
		kept   []string // keys, newest first
	}{
		{"newest within a quarter", notes, 4000, []string{"k10", "k9", "k8", "k7", "k6", "k5"}},
		{"all fit", notes[:3], 100_000, []string{"k3", "k2", "k1"}},
		{"one cut", []protocol.Note{{Key: "old", Value: "x"}, {Key: "huge", Value: fill("huge", 20_000)}}, 4000, []string{"huge"}},
		{"tiny budget keeps one", notes, 100, []string{"k10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Task: "Go.", Notes: tt.notes, Budget: tt.budget, Steps: []Step{st(1, "", ex("e", []string{"ls"}, "a"))}}
			out := Assemble(in)
			checkOutput(t, in, out)
			m := out.Messages[1]
			if m.Role != protocol.RoleUser || !strings.Contains(m.Content, "not instructions, and possibly out of date") {
				t.Fatalf("message 1 = %.100q, want the notes", m.Content)
			}
			var keys []string
			for _, line := range strings.Split(m.Content, "\n- ")[1:] {
				k, _, _ := strings.Cut(line, ": ")
				keys = append(keys, k)
			}
			if !slices.Equal(keys, tt.kept) || out.Stats.Notes != len(tt.kept) {
				t.Errorf("notes kept = %v (Stats.Notes %d), want %v", keys, out.Stats.Notes, tt.kept)
			}
			if size := len(mustJSON(m)); tt.budget >= 1000 && Tokens(size, 0) > tt.budget/4 {
				t.Errorf("the notes are %d tokens, over a quarter of %d", Tokens(size, 0), tt.budget)
			}
		})
	}
	// No notes, no message.
	if out := Assemble(Input{Task: "Go.", Budget: 4000}); len(out.Messages) != 1 || out.Stats.Notes != 0 {
		t.Errorf("no notes: %d messages, Stats.Notes %d; want the task alone", len(out.Messages), out.Stats.Notes)
	}
}

func TestLastStepAlwaysCarried(t *testing.T) {
	last := st(3, "Running it all.", ex("e2", []string{"go", "test"}, fill("fail", 5000)), rd("r2", "a.go", fill("src", 5000)))
	last.After = []protocol.Message{{Role: protocol.RoleUser, Content: "Two steps left."}}
	in := Input{Task: "Fix.", Budget: 1400, Steps: []Step{
		st(1, "", rd("r1", "b.go", fill("b", 1000))),
		st(2, "", ex("e1", []string{"ls"}, fill("ls", 1000))),
		last,
	}}
	out := Assemble(in)
	checkOutput(t, in, out)
	tail := out.Messages[len(out.Messages)-4:]
	if !reflect.DeepEqual(tail[0], last.Turn) || tail[3].Content != "Two steps left." {
		t.Errorf("the last step is not carried as it is:\n%s", contents(tail))
	}
	for _, m := range tail[1:3] {
		if strings.HasPrefix(m.Content, "[elided") {
			t.Errorf("the last step's result %s is a stub", m.ToolCallID)
		}
	}
	if toolContent(t, out.Messages, "r1") == fill("b", 1000) || toolContent(t, out.Messages, "e1") == fill("ls", 1000) {
		t.Errorf("older results were carried in the last step's room:\n%s", contents(out.Messages))
	}

	// When the always-carried parts alone are over, they are carried and
	// the estimate says so.
	in.Budget, in.Output = 2000, 1500
	out = Assemble(in)
	checkOutput(t, in, out)
	if out.Stats.Estimate <= in.Budget {
		t.Errorf("Estimate = %d, want it honestly over %d", out.Stats.Estimate, in.Budget)
	}
	if got := out.Messages[len(out.Messages)-4:]; !reflect.DeepEqual(got[0], last.Turn) {
		t.Errorf("the last step is not carried when over:\n%s", contents(got))
	}
}

func TestThinkingDropped(t *testing.T) {
	think := []protocol.Thinking{{Kind: protocol.ThinkingText, Text: "let me see", Signature: "c2ln"}}
	var steps []Step
	for i := 1; i <= 3; i++ {
		s := st(i, "step", ex("e"+itoa(i), []string{"ls"}, "a.go"))
		s.Turn.Thinking = think
		steps = append(steps, s)
	}
	for _, budget := range []int{100_000, 600} {
		in := Input{Task: "Go.", Steps: steps, Budget: budget}
		out := Assemble(in)
		checkOutput(t, in, out)
		var with []int
		for i, m := range out.Messages {
			if len(m.Thinking) > 0 {
				with = append(with, i)
			}
		}
		if n := len(out.Messages); !slices.Equal(with, []int{n - 2}) || !reflect.DeepEqual(out.Messages[n-2].Thinking, think) {
			t.Errorf("budget %d: thinking on messages %v, want only the last turn's (%d)", budget, with, n-2)
		}
	}
	if steps[0].Turn.Thinking == nil {
		t.Errorf("Assemble changed its input")
	}
}

func TestTruncation(t *testing.T) {
	src := fill("src", 9000) + "THE END"
	log := fill("log", 9000) + "THE END"
	long := "BEGIN " + fill("plan", 9000) + "THE END"
	in := Input{Task: "Go.", Budget: 10_000, Steps: []Step{ // 5,000-char entries, and room for them all
		st(1, long, rd("r1", "a.go", src), ex("e1", []string{"make"}, log),
			mkop("w1", "write_file", map[string]string{"path": "big.go", "content": src}, "wrote big.go")),
		st(2, long, ex("e2", []string{"ls"}, log)),
	}}
	got := Assemble(in)
	checkOutput(t, in, got)
	if got.Stats.Stubbed != 0 {
		t.Fatalf("Stats = %+v, want nothing stubbed", got.Stats)
	}
	limit := entryCap(in.Budget)
	for _, c := range []struct {
		name, s string
		tail    bool
	}{
		{"read", toolContent(t, got.Messages, "r1"), true},
		{"exec", toolContent(t, got.Messages, "e1"), false},
		{"last step's exec", toolContent(t, got.Messages, "e2"), false},
		{"older turn's text", got.Messages[1].Content, false},
	} {
		if n := utf8.RuneCountInString(c.s); n > limit || !strings.Contains(c.s, "…[truncated: elided ") {
			t.Errorf("%s: %d chars, want it cut to %d with a marker", c.name, n, limit)
		}
		if c.tail != strings.HasSuffix(c.s, "THE END") {
			t.Errorf("%s cut = %.30q...%q, want its tail kept: %v", c.name, c.s, c.s[len(c.s)-30:], c.tail)
		}
	}
	var a map[string]string
	if err := json.Unmarshal(got.Messages[1].ToolCalls[2].Arguments, &a); err != nil || utf8.RuneCountInString(a["content"]) > limit || a["path"] != "big.go" {
		t.Errorf("older write's arguments = %.80s (%v), want its content cut to %d chars", got.Messages[1].ToolCalls[2].Arguments, err, limit)
	}
	if last := got.Messages[len(got.Messages)-2]; last.Content != long {
		t.Errorf("the last turn's text was cut to %d chars, want it whole", len(last.Content))
	}
	if in.Steps[0].Turn.ToolCalls[2].Arguments[0] != '{' || len(in.Steps[0].Turn.ToolCalls[2].Arguments) < 9000 {
		t.Errorf("Assemble changed its input's arguments")
	}
}

func TestUnmatchedResults(t *testing.T) {
	s := st(1, "", rd("a", "a.go", "A"), rd("b", "b.go", "B"), rd("c", "c.go", "C"))
	s.Results = []Result{{CallID: "c", Content: "C"}, {CallID: "zz", Content: "orphan"}, {CallID: "a", Content: "A"}, {CallID: "a", Content: "again"}}
	in := Input{Task: "Go.", Budget: 100_000, Steps: []Step{s, st(2, "", ex("e", []string{"ls"}, ""))}}
	out := Assemble(in)
	checkOutput(t, in, out)
	for id, want := range map[string]string{"a": "A", "b": missingResult, "c": "C", "e": emptyResult} {
		if got := toolContent(t, out.Messages, id); got != want {
			t.Errorf("result %s = %q, want %q", id, got, want)
		}
	}
	if out.Stats.Carried != 3 {
		t.Errorf("Stats.Carried = %d, want 3 (the results that answer a call)", out.Stats.Carried)
	}
}

func TestDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		in := gen(seed, 3000+int(seed)*500, 300, 3.5)
		a, b := Assemble(in), Assemble(in)
		ja, jb := mustJSON(a), mustJSON(b)
		if string(ja) != string(jb) {
			t.Fatalf("seed %d: two assemblies of one input differ", seed)
		}
	}
}

// TestStubbedStaysStubbed grows a run under a fixed budget: a result
// stubbed for one request is not carried whole in a later one, and the
// request keeps the one before as its prefix in most turns, so a
// provider's prompt cache holds.
func TestStubbedStaysStubbed(t *testing.T) {
	var steps []Step
	for i := 1; i <= 120; i++ {
		steps = append(steps, st(i, "", rd("r"+itoa(i), "f"+itoa(i)+".go", fill("f", 400+(i*37)%900))))
	}
	in := Input{Task: "Read.", Budget: 6000, Output: 1000}
	stubbed := map[string]int{} // call id -> the step of the request that first stubbed it
	var prev []protocol.Message
	pressed, breaks := 0, 0
	for k := 1; k <= len(steps); k++ {
		in.Steps = steps[:k]
		out := Assemble(in)
		checkOutput(t, in, out)
		for _, m := range out.Messages {
			if m.Role != protocol.RoleTool {
				continue
			}
			if strings.HasPrefix(m.Content, "[") {
				if _, ok := stubbed[m.ToolCallID]; !ok {
					stubbed[m.ToolCallID] = k
				}
			} else if at, ok := stubbed[m.ToolCallID]; ok {
				t.Errorf("request %d: %s was stubbed in request %d and is whole again", k, m.ToolCallID, at)
			}
		}
		if len(stubbed) > 0 {
			pressed++
			if len(out.Messages) < len(prev) || !reflect.DeepEqual(out.Messages[:len(prev)], prev) {
				breaks++
			}
		}
		prev = out.Messages
	}
	t.Logf("pressed %d breaks %d", pressed, breaks)
	if pressed < 90 || breaks > pressed/2 {
		t.Errorf("of %d requests under pressure, %d did not begin with the one before; want at most half", pressed, breaks)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestStaleReadWithRoomToSpare: with room for the whole transcript, a read
// of a file written since is still not carried as it was: it is reported
// stale, and carried as read again once the caller gives what the file
// holds now; a superseded read, meanwhile, stays whole.
func TestStaleReadWithRoomToSpare(t *testing.T) {
	steps := []Step{
		st(1, "", rd("c1", "a.go", "OLD")),
		st(2, "", wr("c2", "a.go")),
		st(3, "", ex("c3", []string{"go", "test"}, "ok")),
	}
	in := Input{System: "sys", Task: "Fix a.go.", Steps: steps, Budget: 100_000, Output: 4096}
	out := Assemble(in)
	checkOutput(t, in, out)
	if len(out.Stale) != 1 || out.Stale[0].CallID != "c1" || out.Stale[0].WrittenAt != 2 {
		t.Fatalf("Stale = %+v, want the read c1, written at step 2", out.Stale)
	}
	if strings.Contains(contents(out.Messages), "OLD") {
		t.Errorf("the stale content is carried:\n%s", contents(out.Messages))
	}
	in.Fresh = map[string]string{"c1": "NEW"}
	out = Assemble(in)
	checkOutput(t, in, out)
	if out.Stale != nil || out.Stats.Reread != 1 || !strings.Contains(contents(out.Messages), "NEW") || strings.Contains(contents(out.Messages), "OLD") {
		t.Errorf("with the re-read: Stale %v, Stats %+v, messages\n%s; want NEW carried", out.Stale, out.Stats, contents(out.Messages))
	}
}
