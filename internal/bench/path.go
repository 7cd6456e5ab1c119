package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// path measures the bare path of a step: the messages every step of the
// design sends, with none of the harness's work between them, on scratch
// streams of the same server configured as the harness's own are
// (pkg/wire). Each step publishes a task to a work queue kept in memory and
// waits for its acknowledgement, as a coordinator does; a plain pull
// consumer takes it and publishes a turn to a file stream, synced, before
// it acknowledges the task, as a worker does; the step hears the turn once
// the stream republishes it stored, as a coordinator does; waits for the
// previous step's record; makes one core request and reply, as a tool call
// to a sandboxer is; and sends its own record to a second file stream,
// synced, waited for during the next step, as a commit overlaps the next
// step's request. Payloads are a few hundred bytes. loops runs go at once,
// n steps each; it returns the steps' latencies, the steps a second and
// the process's CPU time a step (the server's included).
//
// It is the floor of a step in this design (three roles over the bus, the
// turn durable before its effects, the record durable before the next
// turn is acted on): what a step costs here that is not this is the
// harness's own work.
func path(ctx context.Context, nc *nats.Conn, loops, n int) (lat []time.Duration, rate float64, cpu time.Duration, err error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, 0, 0, err
	}
	const (
		steps = "BENCH_PATH_STEPS"
		task  = "bench.path.steps.default"
		op    = "bench.path.op"
	)
	configs := []jetstream.StreamConfig{
		{Name: steps, Subjects: []string{"bench.path.steps.>"}, Storage: jetstream.MemoryStorage, Retention: jetstream.WorkQueuePolicy,
			Duplicates: 15 * time.Minute},
		{Name: "BENCH_PATH_TURNS", Subjects: []string{"bench.path.turns.>"}, Storage: jetstream.FileStorage, MaxMsgsPerSubject: 1,
			Duplicates: 2 * time.Minute, RePublish: &jetstream.RePublish{Source: "bench.path.turns.>", Destination: "bench.path.stored.>"}},
		{Name: "BENCH_PATH_TRACE", Subjects: []string{"bench.path.trace.>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute},
	}
	for _, c := range configs {
		if _, err := js.CreateOrUpdateStream(ctx, c); err != nil {
			return nil, 0, 0, err
		}
		defer func() { _ = js.DeleteStream(context.Background(), c.Name) }()
	}

	// The sandboxer: answers each op at once.
	responder, err := nc.Subscribe(op, func(m *nats.Msg) { _ = m.Respond(m.Data[:64]) })
	if err != nil {
		return nil, 0, 0, err
	}
	defer func() { _ = responder.Unsubscribe() }()

	// The worker: a pull consumer of the queue, each task on a goroutine
	// of its own (as a worker's slots are), turned into a turn published
	// durably, and only then acknowledged.
	cons, err := js.CreateOrUpdateConsumer(ctx, steps, jetstream.ConsumerConfig{Durable: "workers-default", FilterSubject: task,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: -1})
	if err != nil {
		return nil, 0, 0, err
	}
	answer := make([]byte, 300)
	failed := make(chan error, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		go func() {
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "bench.path.turns." + id, Data: answer}, jetstream.WithMsgID(id)); err != nil {
				select {
				case failed <- err:
				default:
				}
				return
			}
			_ = m.Ack()
		}()
	}, jetstream.PullMaxMessages(max(16, loops)))
	if err != nil {
		return nil, 0, 0, err
	}
	defer cc.Stop()

	const warm = 50
	lats := make([][]time.Duration, loops)
	errs := make(chan error, loops)
	ready := make(chan struct{})
	begun := make(chan struct{}, loops)
	for l := range loops {
		// The coordinator of one run hears its turns once stored.
		stored := make(chan *nats.Msg, 16)
		sub, err := nc.ChanSubscribe(fmt.Sprintf("bench.path.stored.r%d.>", l), stored)
		if err != nil {
			return nil, 0, 0, err
		}
		defer func() { _ = sub.Unsubscribe() }()
		go func() {
			lat, err := pathLoop(ctx, js, nc, l, n, warm, stored, failed, begun, ready)
			lats[l] = lat
			errs <- err
		}()
	}
	if err := nc.Flush(); err != nil {
		return nil, 0, 0, err
	}
	for range loops {
		<-begun // warmed up
	}
	start, cpu0 := time.Now(), cpuTime()
	close(ready)
	for range loops {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	took, cpu := time.Since(start), cpuTime()-cpu0
	if err != nil {
		return nil, 0, 0, err
	}
	for _, l := range lats {
		lat = append(lat, l...)
	}
	return lat, float64(loops*n) / took.Seconds(), cpu / time.Duration(loops*n), nil
}

// pathLoop is one run of path: warm steps, then, once ready is closed, n
// steps timed one by one.
func pathLoop(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, l, n, warm int, stored chan *nats.Msg, failed chan error,
	begun, ready chan struct{}) ([]time.Duration, error) {
	taskData, opData, recData := make([]byte, 600), make([]byte, 200), make([]byte, 400)
	record := fmt.Sprintf("bench.path.trace.r%d", l)
	var prev jetstream.PubAckFuture
	var last uint64 // the record's sequence, for the fencing header a trace append carries
	lat := make([]time.Duration, 0, n)
	lost := time.NewTimer(time.Hour) // one timer for every step's wait, so the loop allocates none
	defer lost.Stop()
	signalled := false
	defer func() {
		if !signalled {
			begun <- struct{}{} // failed while warming up: path waits for every loop
		}
	}()
	for i := range n + warm {
		if i == warm {
			begun <- struct{}{}
			signalled = true
			<-ready
		}
		t0 := time.Now()
		id := fmt.Sprintf("r%d.%d.1", l, i)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "bench.path.steps.default", Data: taskData}, jetstream.WithMsgID(id)); err != nil {
			return nil, err
		}
		lost.Reset(10 * time.Second)
		select {
		case <-stored:
		case err := <-failed:
			return nil, fmt.Errorf("the bare worker's turn: %w", err)
		case <-lost.C:
			return nil, errors.New("the bare step path's turn did not come back within 10 s")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if prev != nil {
			select {
			case ack := <-prev.Ok():
				last = ack.Sequence
			case err := <-prev.Err():
				return nil, err
			}
		}
		if _, err := nc.RequestWithContext(ctx, "bench.path.op", opData); err != nil {
			return nil, err
		}
		var err error
		if prev, err = js.PublishMsgAsync(&nats.Msg{Subject: record, Data: recData},
			jetstream.WithMsgID(id), jetstream.WithExpectLastSequencePerSubject(last)); err != nil {
			return nil, err
		}
		if i >= warm {
			lat = append(lat, time.Since(t0))
		}
	}
	if prev != nil {
		select {
		case <-prev.Ok():
		case err := <-prev.Err():
			return nil, err
		}
	}
	return lat, nil
}
