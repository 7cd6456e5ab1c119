package assemble

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// gen makes a random run from seed: steps of every tool over a few paths
// (so results supersede and go stale), errors, missing and stray results,
// recorded and fresh re-reads, images, notes and thinking.
func gen(seed uint64, budget, output int, bpt float64) Input {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	paths := []string{"a.go", "./a.go", "pkg/b.go", "pkg/x/../b.go", "c <&> ü.go", "d.md"}
	text := func(max int) string {
		n := r.IntN(max + 1)
		var b strings.Builder
		for b.Len() < n {
			switch r.IntN(12) {
			case 0:
				b.WriteString("é✓日本 ")
			case 1:
				b.WriteString("<tag> & \"quote\"\t\n")
			case 2:
				b.WriteString("\x01\u2028")
			default:
				b.WriteString("plain text of a file ")
			}
		}
		return b.String()
	}
	in := Input{System: "You are an agent.", Task: "Do the task. " + text(200), Budget: budget, Output: output, BytesPerToken: bpt,
		Tools: []protocol.ToolSpec{{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	for i := range r.IntN(6) {
		in.Notes = append(in.Notes, protocol.Note{Key: "note" + strconv.Itoa(i), Value: text(800)})
	}
	nsteps := r.IntN(40)
	id := 0
	for n := 1; n <= nsteps; n++ {
		s := Step{N: n, Turn: protocol.Message{Role: protocol.RoleAssistant, Content: text(300)}}
		if r.IntN(3) == 0 {
			s.Turn.Thinking = []protocol.Thinking{{Kind: protocol.ThinkingText, Text: text(200), Signature: "sig"}}
		}
		for range r.IntN(5) {
			id++
			cid := "call_" + strconv.Itoa(id)
			p := paths[r.IntN(len(paths))]
			var call protocol.ToolCall
			switch r.IntN(10) {
			case 0, 1, 2:
				call = protocol.ToolCall{Name: "read_file", Arguments: args(map[string]string{"path": p})}
			case 3:
				call = protocol.ToolCall{Name: "write_file", Arguments: args(map[string]string{"path": p, "content": text(3000)})}
			case 4:
				call = protocol.ToolCall{Name: "edit_file", Arguments: args(map[string]string{"path": p, "search": "a", "replace": "b"})}
			case 5:
				call = protocol.ToolCall{Name: "grep", Arguments: args(map[string]string{"pattern": "TODO", "path_glob": "*.go"})}
			case 6:
				call = protocol.ToolCall{Name: "exec", Arguments: args(map[string][]string{"argv": {"go", "test", "./..."}})}
			case 7:
				call = protocol.ToolCall{Name: "find", Arguments: args(map[string]string{"glob": "*.md"})}
			case 8:
				call = protocol.ToolCall{Name: "view_image", Arguments: args(map[string]string{"path": "shot.png"})}
				s.After = append(s.After, protocol.Message{Role: protocol.RoleUser, Content: "The images you asked to view:",
					Images: []protocol.Image{{MediaType: "image/png", Data: []byte(text(2000))}}})
			default:
				call = protocol.ToolCall{Name: "mcp__x__y", Arguments: json.RawMessage(` { "q" : [1, {"a": "<b>"}] } `)}
			}
			call.ID = cid
			s.Turn.ToolCalls = append(s.Turn.ToolCalls, call)
			res := Result{CallID: cid, Content: text(6000), IsError: r.IntN(8) == 0}
			if r.IntN(6) == 0 {
				res.Fresh, res.ReadAt = ptr(text(1000)), 1+r.IntN(nsteps+1)
			}
			if r.IntN(5) == 0 {
				if in.Fresh == nil {
					in.Fresh = map[string]string{}
				}
				in.Fresh[cid] = text(1000)
			}
			switch r.IntN(20) {
			case 0: // missing
			case 1: // stray, then its own
				s.Results = append(s.Results, Result{CallID: "stray", Content: "?"}, res)
			default:
				s.Results = append(s.Results, res)
			}
		}
		if r.IntN(4) == 0 {
			r.Shuffle(len(s.Results), func(i, j int) { s.Results[i], s.Results[j] = s.Results[j], s.Results[i] })
		}
		if r.IntN(5) == 0 {
			s.After = append(s.After, protocol.Message{Role: protocol.RoleUser, Content: "Only a few steps left."})
		}
		in.Steps = append(in.Steps, s)
	}
	in.Step = nsteps + 1
	return in
}

// fixedFit reports whether the parts Assemble always carries fit the
// budget: the task, the notes and the last step, as the output has them.
func fixedFit(t testing.TB, in Input, out Output) bool {
	fixed := out.Messages[:1]
	if out.Stats.Notes > 0 {
		fixed = out.Messages[:2]
	}
	if n := len(in.Steps); n > 0 {
		last := in.Steps[n-1]
		tail := 1 + len(last.Turn.ToolCalls) + len(last.After)
		fixed = append(fixed[:len(fixed):len(fixed)], out.Messages[len(out.Messages)-tail:]...)
	}
	return Tokens(len(request(t, in, fixed)), in.BytesPerToken)+in.Output <= in.Budget
}

// fixedLen is the size of the parts Assemble always carries, as the
// output has them.
func fixedLen(t testing.TB, in Input, out Output) int {
	fixed := out.Messages[:1]
	if out.Stats.Notes > 0 {
		fixed = out.Messages[:2]
	}
	if n := len(in.Steps); n > 0 {
		last := in.Steps[n-1]
		tail := 1 + len(last.Turn.ToolCalls) + len(last.After)
		fixed = append(fixed[:len(fixed):len(fixed)], out.Messages[len(out.Messages)-tail:]...)
	}
	return len(request(t, in, fixed))
}

// checkInvariants checks what holds of every assembly of in.
func checkInvariants(t *testing.T, in Input) {
	t.Helper()
	out := Assemble(in)
	if err := checkPairs(out.Messages); err != nil {
		t.Fatalf("%v in\n%s", err, contents(out.Messages))
	}
	if out.Messages[0].Content != in.Task {
		t.Fatalf("the first message is not the task")
	}
	req := request(t, in, out.Messages)
	if got, want := out.Stats.Estimate, Tokens(len(req), in.BytesPerToken)+in.Output; got != want || out.Stats.Bytes != len(req) {
		t.Fatalf("Estimate = %d, want %d from %d bytes", got, want, len(req))
	}
	if len(out.Sizes) != len(out.Messages) {
		t.Fatalf("%d sizes for %d messages", len(out.Sizes), len(out.Messages))
	}
	for i := range out.Messages {
		if b, _ := json.Marshal(&out.Messages[i]); out.Sizes[i] != len(b) {
			t.Fatalf("message %d is %d bytes, sized %d: %s", i, len(b), out.Sizes[i], b)
		}
	}
	if fixedFit(t, in, out) && out.Stats.Estimate > in.Budget {
		t.Fatalf("Estimate = %d over the budget %d, though the fixed parts fit (Stats %+v)", out.Stats.Estimate, in.Budget, out.Stats)
	}
	// The margin: with room for the fixed parts and a collapse line in 95%
	// of the prompt's room, the request is in it.
	room := in.Budget - in.Output
	if soft := maxBytes(room-room/20, in.BytesPerToken); fixedLen(t, in, out)+120 <= soft && len(req) > soft {
		t.Fatalf("the request is %d bytes, over the %d of 95%% of its room, though the fixed parts are in it (Stats %+v)", len(req), soft, out.Stats)
	}
	results := 0
	for _, s := range in.Steps {
		for _, c := range s.Turn.ToolCalls {
			for _, r := range s.Results {
				if r.CallID == c.ID {
					results++
					break
				}
			}
		}
	}
	if st := out.Stats; st.Carried+st.Stubbed+st.Superseded != results || st.Reread > st.Carried {
		t.Fatalf("Stats %+v do not account for the %d results", st, results)
	}
	// The caller reads the stale ones again; then there is nothing new to
	// read for the ones it read.
	if len(out.Stale) > 0 {
		fresh := map[string]string{}
		for k, v := range in.Fresh {
			fresh[k] = v
		}
		for _, s := range out.Stale {
			if _, ok := in.Fresh[s.CallID]; ok {
				t.Fatalf("Stale reports %s, which Fresh has", s.CallID)
			}
			fresh[s.CallID] = "read again"
		}
		in2 := in
		in2.Fresh = fresh
		for _, s := range Assemble(in2).Stale {
			if _, ok := fresh[s.CallID]; ok {
				t.Fatalf("Stale reports %s again after it was read again", s.CallID)
			}
		}
	}
}

func TestPairsProperty(t *testing.T) {
	for seed := range uint64(400) {
		budget := []int{1200, 3000, 6000, 20_000, 200_000}[seed%5]
		output := []int{0, 300, 1000}[seed%3]
		bpt := []float64{0, 2.5, 4, 3.7}[seed%4]
		in := gen(seed, budget, output, bpt)
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { checkInvariants(t, in) })
	}
}

func FuzzAssemble(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed, uint32(1000+seed*1500), uint16(seed*200), uint8(seed*13))
	}
	f.Add(uint64(99), uint32(2000), uint16(1990), uint8(40))
	f.Add(uint64(7), uint32(0), uint16(0), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, budget uint32, output uint16, bpt uint8) {
		in := gen(seed, int(budget%300_000), int(output), float64(bpt)/10)
		checkInvariants(t, in)
	})
}

// TestTightBudgets sweeps the budget token by token over a run whose
// older steps are text-only turns and superseded reads, so that collapse
// lines cost more than the steps they stand for, and a budget lands
// between the fixed parts and the fixed parts with a collapse line.
func TestTightBudgets(t *testing.T) {
	var steps []Step
	for i := 1; i <= 12; i++ {
		steps = append(steps, Step{N: i, Turn: protocol.Message{Role: protocol.RoleAssistant}}) // no calls
	}
	for i := 13; i <= 30; i++ {
		steps = append(steps, st(i, "", rd("r"+strconv.Itoa(i), "a.go", fill("a", 200)), ex("e"+strconv.Itoa(i), []string{"ls"}, fill("ls", 150))))
	}
	steps = append(steps, st(31, "", ex("last", []string{"make"}, fill("make", 1500))))
	// Text-only turns between steps of results: each collapses to a line
	// longer than itself.
	var alternate []Step
	for i := 1; i <= 60; i++ {
		if i%2 == 1 {
			alternate = append(alternate, Step{N: i, Turn: protocol.Message{Role: protocol.RoleAssistant}})
			continue
		}
		n := strconv.Itoa(i)
		alternate = append(alternate, st(i, "", rd("a"+n, "a.go", fill("a", 300)), rd("b"+n, "b"+n+".go", fill("b", 500))))
	}
	for budget := 300; budget <= 6000; budget++ {
		for _, s := range [][]Step{steps, alternate} {
			in := Input{Task: "Go.", Steps: s, Budget: budget}
			t.Run(strconv.Itoa(budget), func(t *testing.T) { checkInvariants(t, in) })
		}
	}
}

// TestFitAsBuiltIsFitRebuilt holds Assemble, which fits a transcript over
// the budget by its bound alone as it was built, to fitting one built
// afresh for the fit, as every transcript that does not fit once was:
// the same request, byte for byte, over the generator's runs and budgets
// from well under to well over the transcript.
func TestFitAsBuiltIsFitRebuilt(t *testing.T) {
	overBound := 0
	for seed := range uint64(400) {
		budget := []int{600, 1200, 3000, 6000, 20_000, 200_000}[seed%6]
		in := gen(seed, budget, []int{0, 300, 1000}[seed%3], []float64{0, 2.5, 4, 3.7}[seed%4])
		got := Assemble(in)
		a := &assembly{in: &in}
		a.build()
		if len(a.views) == 0 || a.bound() <= a.soft {
			continue
		}
		overBound++
		a = &assembly{in: &in}
		a.build()
		a.pressure = true
		a.fit()
		want := a.emit()
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Fatalf("seed %d, budget %d: fitted as built\n%s\nfitted rebuilt\n%s", seed, budget, gj, wj)
		}
	}
	if overBound < 100 {
		t.Fatalf("only %d of 400 runs were over the budget by their bound alone; the test needs more", overBound)
	}
}
