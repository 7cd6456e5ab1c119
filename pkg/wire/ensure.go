package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config tunes the streams for a deployment. The zero value suits one node.
type Config struct {
	// Replicas is the replication factor of every stream and bucket. Zero
	// (the default) creates what is missing with 1 and leaves the factor of
	// what exists alone, so a client or a role told nothing never scales a
	// cluster's streams down; a three-node cluster's roles pass 3.
	Replicas int
	// TurnsMaxAge bounds how long a published turn is kept for a resume
	// that needs it; default 24 hours. A turn is needed only until its
	// step commits (the trace keeps it from then on), so this is how long
	// a run may wait, mid-step, for a coordinator before its in-flight
	// call is made again.
	TurnsMaxAge time.Duration
}

// Assets are the handles Ensure or Bind created or found.
type Assets struct {
	Submit    jetstream.Stream
	Steps     jetstream.Stream
	Turns     jetstream.Stream
	Trace     jetstream.Stream
	Runs      jetstream.KeyValue
	Leases    jetstream.KeyValue
	Approvals jetstream.KeyValue
	// Cancels holds the cancellation asked for each run, by run id.
	Cancels jetstream.KeyValue
	Ops     jetstream.KeyValue
	Blobs   jetstream.ObjectStore
	// Workspaces holds snapshots and patches, by content ref.
	Workspaces jetstream.ObjectStore
	// Memory holds each workspace's notes (pkg/memory).
	Memory jetstream.KeyValue

	// bind is set by Bind: the role may create nothing, so a worker
	// consumer is looked up, never created.
	bind     bool
	bindWait time.Duration
	nc       *nats.Conn
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
//
// Errors: a *PermissionError when the server refuses these credentials
// an API call Ensure needs (see Bind for roles that may not create).
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Assets, error) {
	a, err := ensure(ctx, js, cfg)
	if err != nil {
		return nil, explain(js.Conn(), err)
	}
	return a, nil
}

func ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (*Assets, error) {
	r := cfg.Replicas
	turnsAge := cfg.TurnsMaxAge
	if turnsAge == 0 {
		turnsAge = 24 * time.Hour
	}
	a := Assets{nc: js.Conn()}
	var err error
	if a.Submit, err = ensureStream(ctx, js, jetstream.StreamConfig{
		Name:        StreamSubmit,
		Description: "contracts submitted to harness; consumed as a work queue by coordinators",
		Subjects:    []string{SubjectSubmit, SubmitTenantPrefix + "*"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  time.Hour,
		MaxMsgSize:  MaxSubmitBytes,
		// A coordinator answers a request on harness.submit (`nats req`)
		// with the run id, once the run's first record is durable: the
		// stream's own acknowledgement would come first, and say less.
		NoAck:    true,
		Replicas: r,
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
		Name:        StreamTurns,
		Description: "provider turns, durable before the coordinator acts on them",
		Subjects:    []string{TurnsPrefix + ">"},
		// A turn is told to its coordinator once it is stored, never
		// before: the publish reaches core subscribers first, and a turn
		// the stream then refuses or loses would be acted on undurable.
		RePublish:         &jetstream.RePublish{Source: TurnsPrefix + ">", Destination: StoredPrefix + ">"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		MaxAge:            turnsAge,
		MaxMsgsPerSubject: 1,
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
	if a.Cancels, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketCancels,
		Description: "the cancellations asked for, by run: who asked, why, when",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", BucketCancels, err)
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
	if a.Memory, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketMemory,
		Description: "each workspace's notes, which agents remember for the runs after them",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", BucketMemory, err)
	}
	if a.Blobs, err = ensureObjects(ctx, js, jetstream.ObjectStoreConfig{
		Bucket:      BucketBlobs,
		Description: "content-addressed blobs the trace refers to",
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure object store %s: %w", BucketBlobs, err)
	}
	if a.Workspaces, err = ensureObjects(ctx, js, jetstream.ObjectStoreConfig{
		Bucket:      BucketWorkspaces,
		Description: "workspace snapshots submitted with contracts, and the patches their runs bring back",
		Storage:     jetstream.FileStorage,
		Replicas:    r,
	}); err != nil {
		return nil, fmt.Errorf("ensure object store %s: %w", BucketWorkspaces, err)
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
	if b := bindingOf(ctx); b != nil {
		return find(ctx, b, "stream "+cfg.Name, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, cfg.Name) })
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, withReplicas(cfg))
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
		have.Duplicates == cfg.Duplicates && have.NoAck == cfg.NoAck && limit(have.MaxMsgSize) == limit(cfg.MaxMsgSize) && have.MaxAge == cfg.MaxAge &&
		limit(have.MaxMsgsPerSubject) == limit(cfg.MaxMsgsPerSubject) && (cfg.Replicas == 0 || have.Replicas == cfg.Replicas) &&
		samePointee(have.RePublish, cfg.RePublish) {
		return s, nil
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = have.Replicas
	}
	return js.UpdateStream(ctx, cfg)
}

// samePointee reports whether a and b are both nil or point to equal values.
func samePointee[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// limit is a stream limit as the server stores it: a limit we leave at
// zero the server records as -1, "unlimited"; compared as given, every
// start would take it for a change and update the stream.
func limit[T int32 | int64](v T) int64 {
	if v <= 0 {
		return -1
	}
	return int64(v)
}

// apiTimeout bounds each JetStream call of Ensure: a call the server
// refuses for lack of permission is never answered.
const apiTimeout = 10 * time.Second

// withReplicas returns cfg with a replication factor to create it with.
func withReplicas(cfg jetstream.StreamConfig) jetstream.StreamConfig {
	cfg.Replicas = max(cfg.Replicas, 1)
	return cfg
}

// ensureBucket returns the key-value bucket, creating it when missing.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if b := bindingOf(ctx); b != nil {
		return find(ctx, b, "bucket "+cfg.Bucket, func(ctx context.Context) (jetstream.KeyValue, error) { return js.KeyValue(ctx, cfg.Bucket) })
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		cfg.Replicas = max(cfg.Replicas, 1)
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.KeyValue(ctx, cfg.Bucket)
		}
	}
	return kv, err
}

// ensureObjects returns the object store, creating it when missing.
func ensureObjects(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	if b := bindingOf(ctx); b != nil {
		return find(ctx, b, "object store "+cfg.Bucket, func(ctx context.Context) (jetstream.ObjectStore, error) { return js.ObjectStore(ctx, cfg.Bucket) })
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	os, err := js.ObjectStore(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		cfg.Replicas = max(cfg.Replicas, 1)
		os, err = js.CreateObjectStore(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			return js.ObjectStore(ctx, cfg.Bucket)
		}
	}
	return os, err
}

// DefaultWorkerAckWait is the AckWait a coordinator creates a pool's
// consumer with for workers that may not create it themselves; it is the
// worker's own default.
const DefaultWorkerAckWait = 60 * time.Second

// WorkerMaxAckPending bounds the step tasks of one pool in workers' hands
// at once, whatever the workers.
const WorkerMaxAckPending = 1 << 16

// EnsureWorkerConsumer creates or updates the durable consumer of a pool.
// ackWait bounds how long a task may go unacknowledged before another
// worker gets it. On Assets from Bind it only looks the consumer up,
// waiting for a coordinator to create it (coordinator --pools), and then the
// consumer's own AckWait holds.
//
// Errors: a *PermissionError when the server refuses the call; on bound
// Assets, a consumer that does not appear within the bind wait.
func EnsureWorkerConsumer(ctx context.Context, a *Assets, pool string, ackWait time.Duration) (jetstream.Consumer, error) {
	if a.bind {
		return a.waitConsumer(ctx, pool)
	}
	c, err := a.Steps.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       WorkerConsumer(pool),
		Description:   "workers of pool " + pool,
		FilterSubject: Steps(pool),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		// Provider calls are waits of seconds each: a pool may have tens of
		// thousands in flight, each worker bounded by its Concurrency.
		MaxAckPending: WorkerMaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", WorkerConsumer(pool), explain(a.nc, err))
	}
	return c, nil
}

// PullExpiry and PullHeartbeat are what a role's pull of a work queue (a
// pool's step tasks, the submitted contracts) asks of the server: a pull
// request waits at most PullExpiry, and while it waits the server says so
// every PullHeartbeat. A pull the server lost (its consumer's leader not yet
// elected as a cluster forms, or moved to another node, or the consumer
// gone with the steps stream after a NATS restart) is noticed once two
// heartbeats are missed, and asked again: within 2×PullHeartbeat, where the
// client's defaults (30 s and 15 s) left a fresh cluster's first task, or a
// pool after a restart, waiting about half a minute.
const (
	PullExpiry    = 10 * time.Second
	PullHeartbeat = 2 * time.Second
)

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
