package assemble

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestMemoGivesWhatAFreshAssemblyGives assembles each request of the
// generator's runs in turn with one Memo, as a driver does, and holds
// every one to the request assembled without it, byte for byte, while
// the caller changes between two requests what a memo remembers: the
// budget (and with it the entry cap), an older turn's text and a call's
// arguments set in place, a re-read folded into an older result, a
// message after the last step, the tools, and at last another run's
// steps given to the same Memo.
func TestMemoGivesWhatAFreshAssemblyGives(t *testing.T) {
	same := func(t *testing.T, in Input, m *Memo, what string) {
		t.Helper()
		want := Assemble(in)
		in.Memo = m
		got := Assemble(in)
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if string(gj) != string(wj) {
			t.Fatalf("%s: with the memo\n%s\nwithout\n%s", what, gj, wj)
		}
	}
	hits := 0
	for seed := range uint64(120) {
		budget := []int{1200, 6000, 20_000, 200_000}[seed%4]
		full := gen(seed, budget, []int{0, 300}[seed%2], []float64{0, 3.7}[seed%2])
		r := rand.New(rand.NewPCG(seed, 7))
		m := &Memo{}
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			for k := 0; k <= len(full.Steps); k++ {
				in := full
				in.Steps, in.Step = full.Steps[:k], k+1
				if k > 1 {
					j := r.IntN(k - 1)
					s := &full.Steps[j]
					switch r.IntN(8) {
					case 0:
						in.Budget = budget / 2
					case 1:
						s.Turn.Content += " and more"
					case 2:
						if len(s.Turn.ToolCalls) > 0 {
							s.Turn.ToolCalls[0].Arguments = args(map[string]string{"path": "moved.go"})
						}
					case 3:
						if len(s.Results) > 0 {
							s.Results[0].Fresh, s.Results[0].ReadAt = ptr("what it holds now"), k
						}
					case 4:
						full.Steps[k-1].After = append(full.Steps[k-1].After, protocol.Message{Role: protocol.RoleUser, Content: "A note."})
					case 5:
						in.Tools = append([]protocol.ToolSpec{{Name: "exec", Description: "Run.", Parameters: json.RawMessage(`{}`)}}, in.Tools...)
					}
				}
				same(t, in, m, "request "+strconv.Itoa(k+1))
			}
			other := gen(seed+1000, budget, 0, 0)
			same(t, other, m, "another run's steps")
		})
		for i := range m.steps {
			if m.steps[i].olderOK {
				hits++
			}
		}
	}
	if hits == 0 {
		t.Fatal("no memo kept an older turn: the memo is never used")
	}
}
