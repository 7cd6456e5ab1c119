package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// liveProgress prints a run's events as lines of progress and, on a
// terminal, how long the model has been thinking while a turn is awaited,
// on one line rewritten each second and cleared before the next event.
// Piped, it prints the events alone.
type liveProgress struct {
	w    io.Writer
	tick <-chan time.Time // nil: not a terminal
	now  func() time.Time

	mu      sync.Mutex
	waiting time.Time // when the turn awaited was asked for; zero when none
	shown   bool      // the thinking line is on the screen
	done    chan struct{}
	stop    func()
}

// newProgress starts the progress of a command writing to env.stderr.
func newProgress(env *environ) *liveProgress {
	p := &liveProgress{w: env.stderr, now: time.Now, done: make(chan struct{})}
	if env.tty {
		t := time.NewTicker(time.Second)
		p.tick, p.stop = t.C, t.Stop
		go p.run()
	}
	return p
}

// observe is the observer to give the run.
func (p *liveProgress) observe(ev *protocol.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	printEvent(p.w, ev)
	switch ev.Kind {
	case protocol.EventStarted, protocol.EventStep:
		p.waiting = p.now() // the next turn is being asked for
	case protocol.EventTurn, protocol.EventFinished, protocol.EventApproval:
		p.waiting = time.Time{}
	}
}

func (p *liveProgress) run() {
	for {
		select {
		case <-p.done:
			return
		case <-p.tick:
			p.mu.Lock()
			if !p.waiting.IsZero() {
				fmt.Fprintf(p.w, "\r\033[K  the model is thinking… %s", p.now().Sub(p.waiting).Round(time.Second))
				p.shown = true
			}
			p.mu.Unlock()
		}
	}
}

// clear takes the thinking line off the screen; p.mu is held.
func (p *liveProgress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// close stops the thinking line, clearing it.
func (p *liveProgress) close() {
	if p.stop != nil {
		p.stop()
		close(p.done)
	}
	p.mu.Lock()
	p.clear()
	p.mu.Unlock()
}
