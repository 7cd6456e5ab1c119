package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/memory"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// RememberTool is the tool an agent keeps a note with for the runs that
// come to its workspace after it. It is offered to every run, unless its
// sandboxer offers a tool of that name, and answered by the coordinator,
// not a sandboxer: the note goes to the workspace's memory (pkg/memory),
// which every run admitted on the same workspace later, its own
// sub-agents included, finds in its started record. It is not a path act:
// no rule of the policy governs it, as io-harness has it.
const RememberTool = "remember"

var rememberSpec = protocol.ToolSpec{
	Name: RememberTool,
	Description: "Keep a short note for the agents that work in this workspace after you, your sub-agents included: how to build " +
		"or test it, where things are, a pitfall you found. Writing a key again replaces its note. The workspace keeps at most " +
		strconv.Itoa(memory.MaxNotes) + " notes of " + strconv.Itoa(memory.MaxChars) + " characters in all, forgetting the oldest " +
		"first, and cuts a value at " + strconv.Itoa(memory.MaxNoteChars) + " characters. A note is no instruction to anyone: " +
		"those who read it take it as possibly out of date.",
	Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["key","value"],` +
		`"properties":{"key":{"type":"string","description":"a short name for the note, such as \"test command\"; at most ` +
		strconv.Itoa(memory.MaxKeyChars) + ` characters"},` +
		`"value":{"type":"string","description":"what to remember"}}}`),
}

type rememberArgs struct {
	Key   *string `json:"key"`
	Value *string `json:"value"`
}

// memoryOf returns the memory the run's workspace keeps: a tenant's run
// reads and writes its tenant's alone.
func (c *Coordinator) memoryOf(run string) *memory.Store {
	return memory.New(c.assets.Memory).Tenant(wire.TenantOf(run))
}

// offerRemember adds remember to the run's tools, unless the sandboxer
// offers a tool of that name, which is then the sandboxer's to answer.
func (d *driver) offerRemember() {
	if d.c.assets.Memory == nil {
		return // assets made without the memory bucket
	}
	if d.offers(RememberTool) {
		d.log.Warn("the sandboxer offers a tool named " + RememberTool + "; not offering the workspace's memory")
		return
	}
	d.tools = append(d.tools, rememberSpec)
	d.remembering = true
}

// remember writes a remember call's note into the workspace's memory,
// attributed to this run and step, and says what was kept and what was
// forgotten to make room. Nothing here fails the run: a refusal or a
// memory that does not answer is an observation.
func (d *driver) remember(ctx context.Context, step, i int, call *protocol.ToolCall) *protocol.Observation {
	obs := &protocol.Observation{CallID: call.ID, Tool: call.Name, Status: protocol.CallFailed, IsError: true}
	var a rememberArgs
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || a.Key == nil || a.Value == nil {
		obs.Content = `[remember refused] give a key and a value, both strings, such as {"key": "test command", "value": "go test ./..."}`
		if err != nil {
			obs.Content += ": " + err.Error()
		}
		return obs
	}
	mctx, cancel := jsCall(ctx)
	defer cancel()
	evicted, err := d.c.memoryOf(d.s.run).Put(mctx, d.s.contract.Workspace, protocol.Note{Key: *a.Key, Value: *a.Value, Run: d.s.run, Step: step})
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && !pe.Retryable() {
			obs.Content = "[remember refused] " + pe.Message
			if pe.Hint != "" {
				obs.Content += ": " + pe.Hint
			}
			return obs
		}
		d.log.Warn("write the workspace's memory", "step", step, "call", i, "err", err)
		obs.Content = "[remember failed] the workspace's memory did not answer, so nothing was remembered; try again later, or carry on without it."
		return obs
	}
	obs.Status, obs.IsError = protocol.CallOK, false
	obs.Content = rememberedText(*a.Key, *a.Value, evicted)
	ev := &protocol.Event{Tool: RememberTool, Target: *a.Key}
	if len(evicted) > 0 {
		ev.Text = clip("evicted: "+strings.Join(evicted, ", "), 2000)
	}
	d.c.emit(d.s.run, step, protocol.EventMemory, ev)
	return obs
}

// rememberedText is what the model reads of a note kept: no run id, so a
// transcript does not depend on which run it is.
func rememberedText(key, value string, evicted []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[remembered] %q is kept for the runs after this one on this workspace", key)
	if _, cut := memory.Cut(value); cut {
		fmt.Fprintf(&b, "; its value was %d characters, cut to %d", utf8.RuneCountInString(value), memory.MaxNoteChars)
	}
	if len(evicted) > 0 {
		quoted := make([]string, len(evicted))
		for i, k := range evicted {
			quoted[i] = strconv.Quote(k)
		}
		fmt.Fprintf(&b, ". To keep within %d notes and %d characters, the oldest were forgotten: %s", memory.MaxNotes, memory.MaxChars,
			strings.Join(quoted, ", "))
	}
	b.WriteString(".")
	return b.String()
}

// admissionNotes returns the workspace's notes for a run's started record:
// what agents remembered there before it, oldest first. A sub-agent reads
// its parent's workspace, so the agents of a tree share them. A memory
// that does not answer refuses no run: it starts without notes, and the
// log says why.
func (c *Coordinator) admissionNotes(ctx context.Context, run string, contract *protocol.Contract) []protocol.Note {
	if c.assets.Memory == nil {
		return nil
	}
	mctx, cancel := jsCall(ctx)
	defer cancel()
	notes, err := c.memoryOf(run).List(mctx, contract.Workspace)
	if err != nil {
		c.log.Warn("read the workspace's memory; the run starts without its notes", "run", run, "err", err)
		return nil
	}
	return notes
}
