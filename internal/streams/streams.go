// Package streams declares the JetStream streams, consumers, key-value
// buckets and object store that the harness roles share, and creates them
// idempotently. Every role calls Ensure at start, so any role may come up
// first. The names here are the wire names documented in docs/protocol.md.
package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/trace"
)

// Subjects and their prefixes.
const (
	SubjectSubmit      = "harness.submit"
	StepsPrefix        = "harness.steps."
	TurnsPrefix        = "harness.turns."
	TracePrefix        = "harness.trace."
	EventsPrefix       = "harness.events."
	SandboxOpenSubject = "harness.sandbox.open"
	SandboxPrefix      = "harness.sandbox."
)

// Stream, bucket and consumer names.
const (
	StreamSubmit    = "HARNESS_SUBMIT"
	StreamSteps     = "HARNESS_STEPS"
	StreamTurns     = "HARNESS_TURNS"
	StreamTrace     = trace.StreamName
	BucketRuns      = "harness-runs"
	BucketLeases    = "harness-leases"
	BucketApprovals = "harness-approvals"
	BucketOps       = "harness-ops"
	BucketBlobs     = "harness-blobs"

	ConsumerCoordinators = "coordinators"
)

// Headers.
const (
	// HeaderReply names the subject a submitter wants its answer on: the run
	// id, or a typed error. JetStream keeps no reply subject of its own for
	// a stored message, so it travels as a header.
	HeaderReply = "Harness-Reply"
)

// Steps returns the subject of a worker pool's step tasks.
func Steps(pool string) string { return StepsPrefix + pool }

// Turns returns the subject a run's turns are published on.
func Turns(run string) string { return TurnsPrefix + run }

// Trace returns the subject of a run's trace.
func Trace(run string) string { return TracePrefix + run }

// Event returns the subject of one live event of a run.
func Event(run, kind string) string { return EventsPrefix + run + "." + kind }

// SandboxOps returns the subject a sandboxer node takes operations on.
func SandboxOps(node string) string { return SandboxPrefix + node + ".op" }

// WorkerConsumer names the durable consumer of a worker pool.
func WorkerConsumer(pool string) string { return "workers-" + pool }

// Config tunes the streams for a deployment. The zero value suits one node.
type Config struct {
	// Replicas is the replication factor of every stream and bucket;
	// default 1. A three-node cluster uses 3.
	Replicas int
	// TurnsMaxAge bounds how long a published turn is kept for a resume
	// that needs it; default 7 days. The trace keeps turns forever.
	TurnsMaxAge time.Duration
}

// Assets are the handles Ensure created or found.
type Assets struct {
	Submit    jetstream.Stream
	Steps     jetstream.Stream
	Turns     jetstream.Stream
	Trace     jetstream.Stream
	Runs      jetstream.KeyValue
	Leases    jetstream.KeyValue
	Approvals jetstream.KeyValue
	Ops       jetstream.KeyValue
	Blobs     jetstream.ObjectStore
}

// Ensure creates every stream and bucket that is missing, and updates a
// stream whose settings of ours differ. It is idempotent and
// safe to call from every role at once.
//
// Storage and retention were chosen by measurement (docs/protocol.md):
// contracts, turns and the trace are files; step tasks are memory with
// work-queue retention, because a step task can always be derived again from
// the trace and a file-backed work queue costs 100-360 µs a task on the
// disks we measured against about 24 µs in memory.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Assets, error) {
	r := cfg.Replicas
	if r == 0 {
		r = 1
	}
	turnsAge := cfg.TurnsMaxAge
	if turnsAge == 0 {
		turnsAge = 7 * 24 * time.Hour
	}
	var a Assets
	var err error
	if a.Submit, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        StreamSubmit,
		Description: "contracts submitted to harness; consumed as a work queue by coordinators",
		Subjects:    []string{SubjectSubmit},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  time.Hour,
		MaxMsgSize:  protocol.MaxContractBytes + 4096,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamSubmit, err)
	}
	if a.Steps, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        StreamSteps,
		Description: "step tasks for workers, one subject per pool",
		Subjects:    []string{StepsPrefix + ">"},
		Storage:     jetstream.MemoryStorage,
		Retention:   jetstream.WorkQueuePolicy,
		// As long as a coordinator waits for a turn: it publishes the task
		// again under the same id while it waits.
		Duplicates: 15 * time.Minute,
		MaxMsgSize: 8 << 20,
		Replicas:   r,
	}); err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamSteps, err)
	}
	if a.Turns, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:              StreamTurns,
		Description:       "provider turns, durable before the coordinator acts on them",
		Subjects:          []string{TurnsPrefix + ">"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		MaxAge:            turnsAge,
		MaxMsgsPerSubject: 4,
		Duplicates:        2 * time.Minute,
		MaxMsgSize:        8 << 20,
		Replicas:          r,
	}); err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamTurns, err)
	}
	if a.Trace, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        StreamTrace,
		Description: "the durable trace: one subject per run, one record per committed step",
		Subjects:    []string{TracePrefix + ">"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Duplicates:  2 * time.Minute,
		MaxMsgSize:  1 << 20,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", StreamTrace, err)
	}
	if a.Runs, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketRuns,
		Description: "run index: where each run stands (a cache of the trace)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", BucketRuns, err)
	}
	if a.Leases, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketLeases,
		Description: "one lease per running run: which coordinator drives it, until when, at which generation",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", BucketLeases, err)
	}
	if a.Approvals, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketApprovals,
		Description: "actions waiting for a person, and the decisions made about them",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", BucketApprovals, err)
	}
	if a.Ops, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketOps,
		Description: "sandbox operations begun and their results, so an op id runs at most once",
		History:     1,
		TTL:         7 * 24 * time.Hour,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", BucketOps, err)
	}
	if a.Blobs, err = ensureObjects(ctx, js, jetstream.ObjectStoreConfig{
		Bucket:      BucketBlobs,
		Description: "content-addressed blobs the trace refers to",
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure object store %s: %w", BucketBlobs, err)
	}
	return &a, nil
}

// ensureStream returns the stream cfg describes, creating it when it is
// missing and updating it only when a setting of ours differs. Every role
// ensures the streams at every start and reconnect; an update on each would
// be needless work on the server, and an update racing with consumers
// being created is a data race inside nats-server v2.15.2's file store
// (seen under the race detector).
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return js.Stream(ctx, cfg.Name)
		}
		return s, err
	}
	if err != nil {
		return nil, err
	}
	have := s.CachedInfo().Config
	if slices.Equal(have.Subjects, cfg.Subjects) && have.Storage == cfg.Storage && have.Retention == cfg.Retention &&
		have.Duplicates == cfg.Duplicates && have.MaxMsgSize == cfg.MaxMsgSize && have.MaxAge == cfg.MaxAge &&
		have.MaxMsgsPerSubject == cfg.MaxMsgsPerSubject && have.Replicas == cfg.Replicas {
		return s, nil
	}
	return js.UpdateStream(ctx, cfg)
}

// ensureBucket returns the key-value bucket, creating it when missing.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.KeyValue(ctx, cfg.Bucket)
		}
	}
	return kv, err
}

// ensureObjects returns the object store, creating it when missing.
func ensureObjects(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	os, err := js.ObjectStore(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		os, err = js.CreateObjectStore(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.ObjectStore(ctx, cfg.Bucket)
		}
	}
	return os, err
}

// EnsureWorkerConsumer creates or updates the durable consumer of a pool.
// ackWait bounds how long a task may go unacknowledged before another
// worker gets it.
func EnsureWorkerConsumer(ctx context.Context, a *Assets, pool string, ackWait time.Duration) (jetstream.Consumer, error) {
	c, err := a.Steps.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       WorkerConsumer(pool),
		Description:   "workers of pool " + pool,
		FilterSubject: Steps(pool),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		MaxAckPending: 1024,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", WorkerConsumer(pool), err)
	}
	return c, nil
}

// EnsureCoordinatorConsumer creates or updates the durable consumer of the
// submit stream.
func EnsureCoordinatorConsumer(ctx context.Context, a *Assets) (jetstream.Consumer, error) {
	c, err := a.Submit.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       ConsumerCoordinators,
		Description:   "coordinators taking submitted contracts",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		MaxAckPending: 1024,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", ConsumerCoordinators, err)
	}
	return c, nil
}
