package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// lockedBuffer is a buffer the progress goroutine and the test share.
type lockedBuffer struct {
	syncWriter
	b *bytes.Buffer
}

func newLockedBuffer() *lockedBuffer {
	b := &bytes.Buffer{}
	return &lockedBuffer{syncWriter: syncWriter{w: b}, b: b}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgressShowsTheModelThinking drives the progress of a terminal with
// ticks of its own: while a turn is awaited each tick rewrites one line
// with the time the model has taken, the next event clears it, and no
// line is shown once the turn is in. Piped, nothing but the events is
// written.
func TestProgressShowsTheModelThinking(t *testing.T) {
	out := newLockedBuffer()
	tick := make(chan time.Time)
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	p := &liveProgress{w: out, tick: tick, now: func() time.Time { return now }, done: make(chan struct{}), stop: func() {}}
	go p.run()
	p.observe(&protocol.Event{Kind: protocol.EventStarted, Text: "fix the test"})
	now = now.Add(3 * time.Second)
	tick <- now
	tick <- now // the second tick is taken only once the first is written
	if got := out.String(); !strings.Contains(got, "\r\033[K  the model is thinking… 3s") {
		t.Fatalf("progress while the model thinks = %q", got)
	}
	p.observe(&protocol.Event{Kind: protocol.EventTurn, Step: 1, Text: "Looking."})
	tick <- now
	tick <- now
	got := out.String()
	if !strings.HasSuffix(got, "\r\033[Kstep 1  says: Looking.\n") {
		t.Fatalf("the turn's line does not clear the thinking line: %q", got)
	}
	p.close()

	piped := newLockedBuffer()
	q := newProgress(&environ{stderr: piped})
	q.observe(&protocol.Event{Kind: protocol.EventStarted, Text: "fix the test"})
	q.close()
	if got := piped.String(); got != "started: fix the test\n" {
		t.Errorf("piped progress = %q, want the event's line alone", got)
	}
}
