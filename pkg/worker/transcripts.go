package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// A step task that extends an earlier task of its run (protocol.TaskBase)
// carries only what follows the earlier request. The worker keeps the
// last request whole of each run it served, within a bound, as a cache it
// may lose: a task whose base it kept is put together from it, and one
// whose base it did not keep (another worker served it, or it was let
// go) is asked for whole from the coordinator holding the run.

// DefaultTranscriptBytes bounds what a worker keeps of the runs' requests
// by default: about the strings of their messages, the least recently
// used let go first.
const DefaultTranscriptBytes = 64 << 20

// wholeAsk is how long a worker waits for the coordinator holding a run
// to give a task's request whole; wholeAgain is how long it waits before
// it asks again when none answered (no coordinator holds the run at that
// step yet, as while one takes it over), and wholeGiveUp how long it asks
// at most, when the task does not expire sooner. It holds the task
// meanwhile rather than give it back: a task delivered again counts as a
// call its earlier worker may have made and lost, which is charged.
var (
	wholeAsk    = time.Second
	wholeAgain  = 250 * time.Millisecond
	wholeGiveUp = time.Minute
)

// errWantedNoMore is a coordinator's word that a task's run is past its
// step; errNoHolder says no coordinator answered for the run in time:
// before the task expired, or within wholeGiveUp.
var (
	errWantedNoMore = errors.New("the run is past the task's step")
	errNoHolder     = fmt.Errorf("no coordinator gave the task's request whole before the task expired or %s passed", wholeGiveUp)
)

// transcripts are the requests whole the worker keeps, a run's last.
type transcripts struct {
	mu    sync.Mutex
	limit int
	size  int
	tick  uint64
	runs  map[string]*kept
}

// kept is one run's last request whole, named by its task's transcript.
type kept struct {
	name string
	req  protocol.CompletionRequest
	size int
	used uint64
	// lent: the room past the end of req.Messages has been given to one
	// task extending the whole request (base), whose messages are written
	// there; no other may write there.
	lent bool
}

func newTranscripts(limit int) *transcripts {
	return &transcripts{limit: limit, runs: map[string]*kept{}}
}

// base is the kept request a task's base names, if the worker has it.
func (t *transcripts) base(run string, b *protocol.TaskBase) (req protocol.CompletionRequest, room, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.runs[run]
	if k == nil || k.name != b.Transcript || len(k.req.Messages) < b.Messages {
		return protocol.CompletionRequest{}, false, false
	}
	t.tick++
	k.used = t.tick
	// The room past the end is lent once, and only to a task that extends
	// the whole request: one extending a shorter prefix would write over
	// messages the kept request, and the calls made with it, still read.
	room = !k.lent && len(k.req.Messages) == b.Messages
	k.lent = k.lent || room
	return k.req, room, true
}

// keep holds req, whole, as the run's last request, named name, letting
// go of the least recently used runs' while over the limit. A request
// over the limit on its own is not kept.
func (t *transcripts) keep(run, name string, req *protocol.CompletionRequest) {
	if t == nil || name == "" {
		return
	}
	size := requestSize(req)
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := t.runs[run]; k != nil {
		t.size -= k.size
		delete(t.runs, run)
	}
	if size > t.limit {
		return
	}
	for t.size+size > t.limit {
		var oldest string
		var at uint64
		for r, k := range t.runs {
			if oldest == "" || k.used < at {
				oldest, at = r, k.used
			}
		}
		t.size -= t.runs[oldest].size
		delete(t.runs, oldest)
	}
	t.tick++
	// Copies: a task's strings share its bytes (decodeTask).
	t.runs[strings.Clone(run)] = &kept{name: strings.Clone(name), req: *req, size: size, used: t.tick}
	t.size += size
}

// requestSize is about what keeping req holds: its strings and bytes.
func requestSize(req *protocol.CompletionRequest) int {
	n := len(req.System)
	for i := range req.Tools {
		n += len(req.Tools[i].Name) + len(req.Tools[i].Description) + len(req.Tools[i].Parameters)
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		n += 64 + len(m.Content) + len(m.ToolCallID)
		for j := range m.ToolCalls {
			n += len(m.ToolCalls[j].ID) + len(m.ToolCalls[j].Name) + len(m.ToolCalls[j].Arguments)
		}
		for j := range m.Images {
			n += len(m.Images[j].Data)
		}
		for j := range m.Thinking {
			n += len(m.Thinking[j].Text) + len(m.Thinking[j].Signature) + len(m.Thinking[j].Data)
		}
	}
	return n
}

// whole makes task's request whole: from the base the worker kept, or
// asked of the coordinator holding the run, again and again while none
// answers, telling the server the task is in hand (msg, nil for none). It
// reports what it found: "kept" or "asked"; errWantedNoMore when the run
// is past the task's step, errNoHolder when no coordinator answered
// in time, or the error of ctx or of the answer.
func (w *Worker) whole(ctx context.Context, task *protocol.StepTask, msg jetstream.Msg) (string, error) {
	b := task.Base
	if kept, room, ok := w.kept.base(task.Run, b); ok {
		// Extending the whole kept request, the task's messages go in
		// the room past its end, lent to this task alone: a run's
		// request grows by a few messages a step, and copying all of
		// them every step was a quarter of the bytes a step allocated in
		// a long run. Otherwise the prefix is copied, into an array with
		// room to grow for the steps after.
		msgs := kept.Messages[:b.Messages:b.Messages]
		if room {
			msgs = kept.Messages[:b.Messages]
		}
		for _, m := range task.Request.Messages {
			msgs = append(msgs, detached(m))
		}
		task.Request.Messages = msgs
		if b.Frame {
			task.Request.System, task.Request.Tools = kept.System, kept.Tools
		}
		task.Base = nil
		return "kept", nil
	}
	until := time.Now().Add(wholeGiveUp)
	if !task.Expires.IsZero() && task.Expires.Before(until) {
		until = task.Expires
	}
	subject := wire.WholeTask(task.Run, task.Step, task.Attempt)
	for {
		actx, cancel := context.WithTimeout(ctx, wholeAsk)
		m, err := w.nc.RequestWithContext(actx, subject, nil)
		cancel()
		if err == nil {
			return "asked", takeWhole(m, task)
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if !time.Now().Add(wholeAgain).Before(until) {
			return "", errNoHolder
		}
		if msg != nil {
			_ = msg.InProgress()
		}
		if err := sleepCtx(ctx, wholeAgain); err != nil {
			return "", err
		}
	}
}

// detached is m with its own copies of the strings and bytes it shares
// with the task it was decoded from (decodeTask): kept for the run's next
// tasks, a message would otherwise keep its whole task alive, the policy
// and the rest, for as long as the run's requests carry it.
func detached(m protocol.Message) protocol.Message {
	m.Role, m.Content, m.ToolCallID = strings.Clone(m.Role), strings.Clone(m.Content), strings.Clone(m.ToolCallID)
	if m.ToolCalls != nil {
		calls := make([]protocol.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			calls[i] = protocol.ToolCall{ID: strings.Clone(c.ID), Name: strings.Clone(c.Name), Arguments: bytes.Clone(c.Arguments)}
		}
		m.ToolCalls = calls
	}
	if m.Images != nil {
		images := make([]protocol.Image, len(m.Images))
		for i, im := range m.Images {
			images[i] = protocol.Image{MediaType: strings.Clone(im.MediaType), Data: bytes.Clone(im.Data)}
		}
		m.Images = images
	}
	if m.Thinking != nil {
		thinking := make([]protocol.Thinking, len(m.Thinking))
		for i, t := range m.Thinking {
			thinking[i] = protocol.Thinking{Kind: strings.Clone(t.Kind), Text: strings.Clone(t.Text), Signature: strings.Clone(t.Signature), Data: strings.Clone(t.Data)}
		}
		m.Thinking = thinking
	}
	return m
}

// takeWhole puts a coordinator's answer in task: the request whole, or
// errWantedNoMore.
func takeWhole(m *nats.Msg, task *protocol.StepTask) error {
	var r protocol.WholeRequest
	if err := wirejson.UnmarshalShared(m.Data, &r); err != nil {
		return err
	}
	switch {
	case r.Error != nil:
		return errWantedNoMore
	case r.Request == nil:
		return errors.New("the coordinator's answer holds no request")
	}
	task.Request, task.Base = *r.Request, nil
	return nil
}
