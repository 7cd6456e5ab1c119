package coordinator

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// A step task carries the run's request whole only when its worker cannot
// have the rest. A run's requests grow by a step at a time and keep their
// prefix while the transcript fits, so each task after the first names
// the last one the driver sent as its base and carries only the messages
// after what the two share: a worker that served the base (on the
// embedded default, the only worker) puts the request together from it,
// and one that did not asks for it whole on harness.task.<run>.<step>.<attempt>,
// which the coordinator holding the run answers from the request it keeps
// for the step's retries. Encoding, storing and decoding the transcript
// again at every step was most of a long run's cost of a step.

// A task extends its base only while one worker serves the run's pool:
// the tasks of a pool go to whichever of its workers takes them, so with
// W workers a base is kept about one time in W, and a worker asking for
// the rest costs the step a round trip and the coordinator an encoding of
// the request, more than carrying it whole. The coordinator counts the
// workers it heard answer a pool's tasks in the last soleMemory.
const soleMemory = time.Minute

// workersHeard are the workers heard answering each pool's tasks, and
// when last.
type workersHeard struct {
	mu    sync.Mutex
	pools map[string]map[string]time.Time
}

// heard notes that worker answered a task of pool at now.
func (h *workersHeard) heard(pool, worker string, now time.Time) {
	if worker == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pools == nil {
		h.pools = map[string]map[string]time.Time{}
	}
	ws := h.pools[pool]
	if ws == nil {
		ws = map[string]time.Time{}
		h.pools[pool] = ws
	}
	if _, ok := ws[worker]; !ok {
		worker = strings.Clone(worker) // kept: not the turn's bytes
	}
	ws[worker] = now
	for w, at := range ws {
		if now.Sub(at) > soleMemory {
			delete(ws, w)
		}
	}
}

// sole reports whether exactly one worker answered pool's tasks within
// soleMemory of now.
func (h *workersHeard) sole(pool string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, at := range h.pools[pool] {
		if now.Sub(at) <= soleMemory {
			n++
		}
	}
	return n == 1
}

// sentTask is the last step task a driver laid out for its run, whole:
// what the next one extends, and what a worker without its base is given.
type sentTask struct {
	step       int
	transcript string
	req        *protocol.CompletionRequest // whole, never changed once sent
	sizes      []int                       // the JSON size of each of req's messages
	frame      int                         // what req's system prompt and tools add to its JSON
}

// layTask lays out the task of an attempt of the step in hand, extending
// the last task the driver laid out when the two requests share their
// frame or a prefix of messages and one worker serves the run's pool
// (soleMemory), and returns it encoded with the size
// it would have whole (what its reservation is estimated on, as for
// every task).
func (d *driver) layTask(step, attempt int) ([]byte, int, error) {
	whole, sizes := d.asm.req, d.asm.sizes
	if d.transcripts == "" {
		d.transcripts = randomHex(8)
	}
	d.laid++
	task := &protocol.StepTask{Run: d.s.run, Step: step, Attempt: attempt, Request: *whole, Deadline: d.s.deadline(),
		Policy: d.wirePolicy(), Expires: time.Now().Add(d.c.cfg.TurnTimeout),
		Transcript: transcriptName(d.transcripts, d.laid)}
	next := &sentTask{step: step, transcript: task.Transcript, req: whole, sizes: sizes}
	prev := d.sent.Load()
	if !d.c.workers.sole(d.s.contract.Provider.Pool, time.Now()) {
		prev = nil // carried whole: see soleMemory
	}
	frame := prev != nil && prev.req.System == whole.System && protocol.SameTools(prev.req.Tools, whole.Tools)
	if frame {
		next.frame = prev.frame
	} else {
		next.frame = frameBytes(whole)
	}
	k := 0
	if prev != nil && len(whole.Messages) > 0 && len(sizes) == len(whole.Messages) {
		// A task carries a message at least.
		k = min(sharedPrefix(prev.req.Messages, whole.Messages), len(whole.Messages)-1)
	}
	omitted := 0
	if k > 0 || frame {
		task.Base = &protocol.TaskBase{Transcript: prev.transcript, Messages: k, Frame: frame}
		task.Request.Messages = whole.Messages[k:]
		if frame {
			task.Request.System, task.Request.Tools = "", nil
			omitted += next.frame
		}
		for _, n := range sizes[:k] {
			omitted += n + 1 // and its comma
		}
		b, err := json.Marshal(task.Base)
		if err != nil {
			return nil, 0, err
		}
		omitted -= len(`,"base":`) + len(b)
	}
	d.sent.Store(next)
	data, err := wirejson.MarshalStepTask(task)
	return data, len(data) + omitted, err
}

// transcriptName names the n-th task a driver laid out, prefix its own
// name.
func transcriptName(prefix string, n int) string { return prefix + "." + strconv.Itoa(n) }

// frameBytes is what a request's system prompt and tools add to its JSON.
func frameBytes(req *protocol.CompletionRequest) int {
	one := []protocol.Message{{}}
	with, err1 := json.Marshal(&protocol.CompletionRequest{Model: req.Model, System: req.System, Tools: req.Tools, Messages: one})
	without, err2 := json.Marshal(&protocol.CompletionRequest{Model: req.Model, Messages: one})
	if err1 != nil || err2 != nil {
		return 0 // the task's own encoding fails the same way, and says so
	}
	return len(with) - len(without)
}

// sharedPrefix is how many messages a and b begin with alike. A message
// the run kept compares at once, its strings and slices the same.
func sharedPrefix(a, b []protocol.Message) int {
	n := 0
	for n < len(a) && n < len(b) && protocol.SameMessage(&a[n], &b[n]) {
		n++
	}
	return n
}

// handleWholeTask answers a worker that holds not a step task's base with
// the step's request whole, when this coordinator holds the run at that
// step; with an error when it holds the run past it (the task is wanted
// no more). It says nothing of a run it does not hold, nor of a step it
// has not laid out yet (a coordinator taking the run over may soon): the
// worker asks again later.
func (c *Coordinator) handleWholeTask(m *nats.Msg) {
	run, step, ok := wholeTaskOf(m.Subject)
	if !ok || m.Reply == "" {
		return
	}
	c.mu.Lock()
	d := c.active[run]
	c.mu.Unlock()
	if d == nil {
		return
	}
	sent := d.sent.Load()
	var reply protocol.WholeRequest
	switch {
	case sent == nil || sent.step < step:
		return
	case sent.step == step:
		reply.Request = sent.req
	default:
		reply.Error = protocol.Errorf(protocol.CodeNotFound, "run %s is past step %d: its task is wanted no more", run, step)
	}
	data, err := wirejson.MarshalWholeRequest(&reply)
	if err != nil {
		c.log.Error("encode a step's request whole", "run", run, "step", step, "err", err)
		return
	}
	_ = m.Respond(data)
}

// wholeTaskOf reads the run and step of a harness.task.<run>.<step>.<attempt> subject.
func wholeTaskOf(subject string) (run string, step int, ok bool) {
	rest, found := strings.CutPrefix(subject, wire.WholeTaskPrefix)
	parts := strings.Split(rest, ".")
	if !found || len(parts) != 3 || !protocol.ValidToken(parts[0]) {
		return "", 0, false
	}
	step, err := strconv.Atoi(parts[1])
	return parts[0], step, err == nil
}
