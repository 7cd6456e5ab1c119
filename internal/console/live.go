package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// Bounds of the live side: pages listening at once, messages queued for a
// page that reads slowly (more are dropped: the page is a view, the trace
// has everything), runs whose live notes are kept and notes kept a run.
const (
	maxListeners  = 256
	listenerQueue = 64
	maxNoteRuns   = 1024
	maxNotes      = 64
	pingEvery     = 25 * time.Second
)

// liveKinds are the events that the trace does not keep, which the
// console keeps in memory for a run's story while it runs.
var liveKinds = map[string]string{
	protocol.EventRetry:    "provider call retried",
	protocol.EventFallback: "fell over to another provider",
	protocol.EventError:    "error",
	protocol.EventLedger:   "budget ledger",
}

type hubMsg struct {
	event string
	data  []byte
}

type listener struct {
	view, run string
	ch        chan hubMsg
}

// hub follows harness.events.> for the pages listening: it tells a run's
// page that its run moved, the approvals page that an approval came or
// went, and sends the runs page each changed run's row, rendered once
// for all of them. It keeps what the trace does not: the live notes of
// retries, fallbacks, ledger waits and errors, and the takeovers it saw
// (a run's coordinator changing between two of its events).
type hub struct {
	s   *Server
	sub *nats.Subscription

	mu        sync.Mutex
	listeners map[*listener]struct{}
	dirty     map[string]bool
	notes     map[string][]Entry
	noteOrder []string
	owners    map[string]string // the coordinator last seen driving each run

	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func startHub(s *Server) (*hub, error) {
	h := &hub{s: s, listeners: map[*listener]struct{}{}, dirty: map[string]bool{}, notes: map[string][]Entry{}, owners: map[string]string{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	sub, err := s.cfg.Client.Conn().Subscribe(wire.EventsPrefix+">", h.heard)
	if err != nil {
		return nil, fmt.Errorf("console: follow %s>: %w", wire.EventsPrefix, err)
	}
	h.sub = sub
	h.wg.Add(1)
	go h.rows()
	return h, nil
}

func (h *hub) close() {
	h.once.Do(func() {
		_ = h.sub.Unsubscribe()
		close(h.done)
		h.wg.Wait()
	})
}

// heard takes one event off NATS.
func (h *hub) heard(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, wire.EventsPrefix)
	run, kind, ok := strings.Cut(rest, ".")
	if !ok || run == "rejected" || kind == protocol.EventToken {
		return // a contract refused before it was a run; a streamed token
	}
	var ev protocol.Event
	if json.Unmarshal(m.Data, &ev) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if title, ok := liveKinds[kind]; ok {
		h.note(run, Entry{Kind: "live", Step: ev.Step, Time: ev.Time, Title: title, Reason: oneLine(ev.Text, 300)})
	}
	approvals := kind == protocol.EventApproval || kind == protocol.EventDecided || kind == protocol.EventFinished
	change, _ := json.Marshal(map[string]string{"run": run, "kind": kind})
	for l := range h.listeners {
		switch {
		case l.view == "run" && l.run == run:
			h.send(l, hubMsg{"change", change})
		case l.view == "approvals" && approvals:
			h.send(l, hubMsg{"approvals", change})
		}
	}
	// The run's index entry is read once for all its events meanwhile:
	// for the runs pages' rows, and to notice a takeover.
	h.dirty[run] = true
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// note keeps a live note of run's, the oldest runs' notes going first.
// Called with h.mu held.
func (h *hub) note(run string, e Entry) {
	if _, ok := h.notes[run]; !ok {
		h.noteOrder = append(h.noteOrder, run)
		if len(h.noteOrder) > maxNoteRuns {
			delete(h.notes, h.noteOrder[0])
			h.noteOrder = h.noteOrder[1:]
		}
	}
	ns := append(h.notes[run], e)
	if len(ns) > maxNotes {
		ns = ns[len(ns)-maxNotes:]
	}
	h.notes[run] = ns
}

func (h *hub) notesOf(run string) []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.notes[run]...)
}

// send queues msg for l, dropping it when l reads too slowly. Called with
// h.mu held.
func (h *hub) send(l *listener, msg hubMsg) {
	select {
	case l.ch <- msg:
	default:
	}
}

// rows renders the row of each run that moved and sends it to the runs
// pages, each run once however many events it had meanwhile.
func (h *hub) rows() {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case <-h.wake:
		}
		h.mu.Lock()
		runs := make([]string, 0, len(h.dirty))
		for r := range h.dirty {
			runs = append(runs, r)
		}
		clear(h.dirty)
		h.mu.Unlock()
		for _, run := range runs {
			st, msg, ok := h.row(run)
			if !ok {
				continue
			}
			h.mu.Lock()
			if prev := h.owners[run]; prev != "" && st.Coordinator != "" && prev != st.Coordinator {
				h.note(run, Entry{Kind: "live", Step: st.Step, Time: st.Updated, Title: "taken over",
					Reason: "coordinator " + st.Coordinator + " took the run over from " + prev})
				change, _ := json.Marshal(map[string]string{"run": run, "kind": "takeover"})
				for l := range h.listeners {
					if l.view == "run" && l.run == run {
						h.send(l, hubMsg{"change", change})
					}
				}
			}
			h.owner(run, st.Coordinator)
			for l := range h.listeners {
				if l.view == "runs" {
					h.send(l, msg)
				}
			}
			h.mu.Unlock()
		}
	}
}

func (h *hub) row(run string) (*protocol.RunState, hubMsg, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := h.s.cfg.Client.Run(run).Status(ctx)
	if err != nil {
		return nil, hubMsg{}, false
	}
	row := rowOf(st, h.s.now())
	var b bytes.Buffer
	if err := h.s.pages["runs"].ExecuteTemplate(&b, "row", row); err != nil {
		h.s.log.Warn("render a run's row", "run", run, "err", err)
		return nil, hubMsg{}, false
	}
	data, _ := json.Marshal(map[string]string{"id": run, "status": row.Status, "search": row.Search, "row": b.String()})
	return st, hubMsg{"run", data}, true
}

// owner remembers which coordinator drives run, for as many runs as
// notes are kept. Called with h.mu held.
func (h *hub) owner(run, coordinator string) {
	if coordinator == "" {
		return
	}
	if _, ok := h.owners[run]; !ok && len(h.owners) >= maxNoteRuns {
		clear(h.owners) // a takeover of a run not heard from for long goes unnoticed
	}
	h.owners[run] = coordinator
}

func (h *hub) listen(view, run string) (*listener, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.listeners) >= maxListeners {
		return nil, false
	}
	l := &listener{view: view, run: run, ch: make(chan hubMsg, listenerQueue)}
	h.listeners[l] = struct{}{}
	return l, true
}

func (h *hub) leave(l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.listeners, l)
}

// live streams a page's server-sent events: GET /live?view=runs, ?view=
// approvals, or ?view=run&run=ID.
func (s *Server) live(w http.ResponseWriter, r *http.Request, _ *viewer) {
	view, run := r.URL.Query().Get("view"), r.URL.Query().Get("run")
	switch {
	case view == "runs", view == "approvals":
	case view == "run" && protocol.ValidToken(run):
	default:
		http.Error(w, "400: ask for view=runs, view=approvals or view=run&run=ID", http.StatusBadRequest)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "500: this connection cannot stream", http.StatusInternalServerError)
		return
	}
	l, ok := s.hub.listen(view, run)
	if !ok {
		http.Error(w, "503: too many pages are listening; reload later", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.leave(l)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n: listening\n\n")
	fl.Flush()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.hub.done:
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n") // keeps proxies from closing a quiet stream
		case m := <-l.ch:
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", m.event, m.data)
		}
		fl.Flush()
	}
}
