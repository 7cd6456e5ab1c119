package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// OrderedRead reads every message of subject in stream with an ordered
// consumer and does nothing with them, up to the subject's last message
// as it stands when the read begins, and returns how many it read: the
// bare read a benchmark of reading a run's trace measures itself against.
func OrderedRead(tb testing.TB, stream jetstream.Stream, subject string) int {
	ctx, cancel := context.WithTimeout(tb.Context(), time.Minute)
	defer cancel()
	last, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		tb.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		tb.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		tb.Fatal(err)
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next()
		if err != nil {
			tb.Fatal(err)
		}
		n++
		meta, err := m.Metadata()
		if err != nil {
			tb.Fatal(err)
		}
		if meta.Sequence.Stream >= last.Sequence {
			return n
		}
	}
}
