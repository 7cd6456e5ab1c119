package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ioharness/harness/pkg/protocol"
)

// DefaultTreeTTL is how long a tree's state is kept after it was last
// refreshed, by default (see RedisConfig.TreeTTL).
const DefaultTreeTTL = 7 * 24 * time.Hour

// RedisConfig configures a Redis ledger. The zero value means the defaults.
type RedisConfig struct {
	// Prefix starts every key; default "ledger". It must not contain a
	// brace, which would break the hash tag.
	Prefix string
	// KeyTTL is how long an idempotency key (a reservation and its
	// answers) is remembered after the reservation; default DefaultKeyTTL
	// (24h). A replay after that is a new draw, and a Settle after that
	// returns ErrReservationUnknown. A reservation neither settled nor
	// released within KeyTTL stays counted as reserved until the tree is
	// restored, so KeyTTL must outlast the longest provider call and
	// resume.
	KeyTTL time.Duration
	// TreeTTL is how long a tree's state is kept after it was last
	// refreshed: by Open, Register, Restore, and by every reservation that
	// brings the tree's step count to a multiple of 16 (not every draw, to
	// keep draws cheap). Default DefaultTreeTTL (7 days); a negative value
	// keeps trees forever. It must not be shorter than KeyTTL. An expired
	// tree answers ErrTreeUnknown and is rebuilt from the trace like a lost
	// one.
	TreeTTL time.Duration
}

// Validate reports a configuration that cannot work.
func (c RedisConfig) Validate() error {
	if strings.ContainsAny(c.Prefix, "{}") {
		return fmt.Errorf("ledger: prefix %q contains a brace", c.Prefix)
	}
	if c.KeyTTL < 0 || (c.KeyTTL > 0 && c.KeyTTL < time.Millisecond) {
		return fmt.Errorf("ledger: key TTL %v is not 0 (the default) or at least 1ms", c.KeyTTL)
	}
	if c.TreeTTL > 0 && c.TreeTTL < time.Millisecond {
		return fmt.Errorf("ledger: tree TTL %v is under 1ms", c.TreeTTL)
	}
	keyTTL, treeTTL := cmp.Or(c.KeyTTL, DefaultKeyTTL), cmp.Or(c.TreeTTL, DefaultTreeTTL)
	if treeTTL > 0 && treeTTL < keyTTL {
		return fmt.Errorf("ledger: tree TTL %v is shorter than key TTL %v: a reservation must not outlive its tree", treeTTL, keyTTL)
	}
	return nil
}

// Redis is a Ledger in Redis, shared by every process of a deployment.
// Every draw is one Lua script run with EVALSHA (and EVAL once after the
// server lost its script cache); all of a tree's keys share the hash tag
// {tree}, so it works on Redis Cluster. It holds counters only: the trace
// holds the truth, and Restore rebuilds from it.
type Redis struct {
	client  redis.UniversalClient
	prefix  string
	keyTTL  int64 // ms
	treeTTL int64 // ms, 0 for none
}

var _ Ledger = (*Redis)(nil)

// NewRedis returns a ledger that keeps its state through client, which
// the caller configures (timeouts, retries, pool) and closes. It does not
// contact the server; it fails only if client is nil or cfg.Validate
// fails.
func NewRedis(client redis.UniversalClient, cfg RedisConfig) (*Redis, error) {
	if client == nil {
		return nil, errors.New("ledger: nil Redis client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Redis{client: client, prefix: cfg.Prefix, keyTTL: cfg.KeyTTL.Milliseconds(), treeTTL: cfg.TreeTTL.Milliseconds()}
	if r.prefix == "" {
		r.prefix = "ledger"
	}
	if cfg.KeyTTL == 0 {
		r.keyTTL = DefaultKeyTTL.Milliseconds()
	}
	switch {
	case cfg.TreeTTL == 0:
		r.treeTTL = DefaultTreeTTL.Milliseconds()
	case cfg.TreeTTL < 0:
		r.treeTTL = 0
	}
	return r, nil
}

func (r *Redis) treeKey(tree string) string { return r.prefix + ":{" + tree + "}" }

func (r *Redis) resKey(tree, key string) string { return r.prefix + ":{" + tree + "}:k:" + key }

// placeKeys are the tree's keys the place scripts take: the tree, the
// places held, the queue and the queued turns.
func (r *Redis) placeKeys(tree string) []string {
	t := r.treeKey(tree)
	return []string{t, t + ":p", t + ":q", t + ":x"}
}

// placesChannel is where the place scripts tell watchers a place was given.
func (r *Redis) placesChannel(tree string) string { return r.treeKey(tree) + ":places" }

// run runs a script and returns its string reply, or the error sorted into
// unavailable (retry) or internal (a bug).
func (r *Redis) run(ctx context.Context, op string, s *redis.Script, keys []string, args ...any) (string, error) {
	v, err := s.Run(ctx, r.client, keys, args...).Result()
	if err != nil {
		return "", r.fail(op, err)
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("ledger %s: %w", op, protocol.Errorf(protocol.CodeInternal, "unexpected script reply %T", v))
}

// transient lists the Redis error replies that mean "not now": loading,
// failing over, out of memory, a busy script. Any error that is not a Redis
// reply at all (refused, reset, timed out, cancelled) is transient too.
var transient = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS", "OOM", "MOVED", "ASK"}

func (r *Redis) fail(op string, err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range transient {
			if strings.HasPrefix(msg, p) {
				return unavailable(op, err)
			}
		}
		return fmt.Errorf("ledger %s: %w: %w", op, protocol.Errorf(protocol.CodeInternal, "redis refused the ledger script"), err)
	}
	return unavailable(op, err)
}

// ceilingArgs returns the limits, start and wall arguments of the open
// and restore scripts.
func ceilingArgs(c Ceiling) []any {
	start := int64(0)
	if !c.Start.IsZero() {
		start = c.Start.UnixMicro()
	}
	limits := pack(c.InputTokens, c.OutputTokens, c.Tokens, c.CostMicros, c.Steps, int64(c.Agents), int64(c.Depth))
	return []any{limits, start, pack(c.Wall.Microseconds())}
}

// Open implements Ledger.
func (r *Redis) Open(ctx context.Context, tree string, c Ceiling) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateCeiling(c); err != nil {
		return err
	}
	_, err := r.run(ctx, "open", openScript, r.placeKeys(tree), append(ceilingArgs(c), r.treeTTL)...)
	return err
}

// Register implements Ledger.
func (r *Redis) Register(ctx context.Context, tree, agent string, depth int) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateID("agent", agent); err != nil {
		return err
	}
	if err := validateAmount("depth", int64(depth)); err != nil {
		return err
	}
	rep, err := r.run(ctx, "register", registerScript, []string{r.treeKey(tree)}, agent, depth, r.treeTTL)
	if err != nil {
		return err
	}
	if rep == "OK" {
		return nil
	}
	return parseFailure(rep, tree, agent)
}

func (r *Redis) reserveArgs(x Reservation) []any {
	c := x.Cap
	return []any{x.Agent, packUsage(x.Estimate), pack(c.InputTokens, c.OutputTokens, c.Tokens, c.CostMicros, c.Steps), r.keyTTL, r.treeTTL}
}

// Reserve implements Ledger.
func (r *Redis) Reserve(ctx context.Context, x Reservation) (Grant, error) {
	if err := validateReservation(x); err != nil {
		return Grant{}, err
	}
	rep, err := r.run(ctx, "reserve", reserveScript, []string{r.treeKey(x.Tree), r.resKey(x.Tree, x.Key)}, r.reserveArgs(x)...)
	if err != nil {
		return Grant{}, err
	}
	return parseGrant(rep, x)
}

// Settle implements Ledger.
func (r *Redis) Settle(ctx context.Context, tree, key string, actual Usage) (Settlement, error) {
	if err := validateSettle(tree, key, actual); err != nil {
		return Settlement{}, err
	}
	rep, err := r.run(ctx, "settle", settleScript, []string{r.treeKey(tree), r.resKey(tree, key)}, packUsage(actual))
	if err != nil {
		return Settlement{}, err
	}
	return parseSettlement(rep, tree, key)
}

// SettleAndReserve implements Ledger.
func (r *Redis) SettleAndReserve(ctx context.Context, key string, actual Usage, next Reservation) (Settlement, Grant, error) {
	if err := validateSettleAndReserve(key, actual, next); err != nil {
		return Settlement{}, Grant{}, err
	}
	args := append([]any{packUsage(actual)}, r.reserveArgs(next)...)
	rep, err := r.run(ctx, "settle and reserve", settleReserveScript,
		[]string{r.treeKey(next.Tree), r.resKey(next.Tree, key), r.resKey(next.Tree, next.Key)}, args...)
	if err != nil {
		return Settlement{}, Grant{}, err
	}
	if len(rep) <= settlementLen || rep[0] != 'S' {
		s, err := parseSettlement(rep, next.Tree, key)
		if err == nil {
			err = badReply(rep)
		}
		return s, Grant{}, err
	}
	s, err := parseSettlement(rep[:settlementLen], next.Tree, key)
	if err != nil {
		return Settlement{}, Grant{}, err
	}
	g, err := parseGrant(rep[settlementLen:], next)
	return s, g, err
}

// Release implements Ledger.
func (r *Redis) Release(ctx context.Context, tree, key string) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateID("key", key); err != nil {
		return err
	}
	rep, err := r.run(ctx, "release", releaseScript, []string{r.treeKey(tree), r.resKey(tree, key)})
	if err != nil {
		return err
	}
	if rep == "OK" {
		return nil
	}
	return parseFailure(rep, tree, "")
}

// Totals implements Ledger. It reads the tree hash and its places in one
// round trip, so its cost grows with the number of agents (not with the
// number of draws).
func (r *Redis) Totals(ctx context.Context, tree string) (Totals, error) {
	if err := validateTree(tree); err != nil {
		return Totals{}, err
	}
	keys := r.placeKeys(tree)
	var (
		h           *redis.MapStringStringCmd
		held, turns *redis.MapStringStringCmd
		queue       *redis.StringSliceCmd
		serverTime  *redis.TimeCmd
	)
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		h, held, queue, turns = p.HGetAll(ctx, keys[0]), p.HGetAll(ctx, keys[1]), p.ZRange(ctx, keys[2], 0, -1), p.HGetAll(ctx, keys[3])
		serverTime = p.Time(ctx)
		return nil
	})
	if err != nil {
		return Totals{}, r.fail("totals", err)
	}
	if _, ok := h.Val()["c"]; !ok {
		return Totals{}, ErrTreeUnknown
	}
	t, err := parseTotals(tree, h.Val())
	if err != nil {
		return Totals{}, err
	}
	t.Places, t.Queued, err = parsePlaces(tree, serverTime.Val(), held.Val(), queue.Val(), turns.Val())
	return t, err
}

// TakePlace implements Ledger.
func (r *Redis) TakePlace(ctx context.Context, p PlaceRequest) (Place, error) {
	if err := validatePlace(p); err != nil {
		return Place{}, err
	}
	running := 0
	if p.Running {
		running = 1
	}
	rep, err := r.run(ctx, "take a place", takePlaceScript, r.placeKeys(p.Tree),
		p.Agent, p.Limit, running, p.Claim.Microseconds(), p.Keep.Microseconds(), r.treeTTL, r.placesChannel(p.Tree))
	if err != nil {
		return Place{}, err
	}
	return parsePlace(rep)
}

// FreePlace implements Ledger.
func (r *Redis) FreePlace(ctx context.Context, tree, agent string) (bool, error) {
	if err := validateTree(tree); err != nil {
		return false, err
	}
	if err := validateID("agent", agent); err != nil {
		return false, err
	}
	rep, err := r.run(ctx, "free a place", freePlaceScript, r.placeKeys(tree), agent, r.treeTTL, r.placesChannel(tree))
	switch {
	case err != nil:
		return false, err
	case rep == "T":
		return false, ErrTreeUnknown
	case rep != "0" && rep != "1":
		return false, badReply(rep)
	}
	return rep == "1", nil
}

var _ PlaceWatcher = (*Redis)(nil)

// WatchPlaces implements PlaceWatcher with a Redis subscription (one
// connection of the client's) held until ctx ends, when its goroutine
// closes it. Errors: the subscription was not confirmed, as unavailable.
func (r *Redis) WatchPlaces(ctx context.Context, tree string) (<-chan struct{}, error) {
	if err := validateTree(tree); err != nil {
		return nil, err
	}
	sub := r.client.Subscribe(ctx, r.placesChannel(tree))
	if _, err := sub.Receive(ctx); err != nil {
		_ = sub.Close()
		return nil, unavailable("watch places", err)
	}
	out := make(chan struct{}, 1)
	msgs := sub.Channel()
	go func() {
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-msgs:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default: // one notice pending is enough
				}
			}
		}
	}()
	return out, nil
}

// Restore implements Ledger. Its script is linear in len(spent).
func (r *Redis) Restore(ctx context.Context, tree string, c Ceiling, spent map[string]Usage) (bool, error) {
	if err := validateRestore(tree, c, spent); err != nil {
		return false, err
	}
	var sum Usage
	agents := make([]any, 0, 2*len(spent))
	for id, u := range spent {
		sum = sum.Add(u)
		agents = append(agents, id, pack(-1, u.InputTokens, u.OutputTokens, u.CostMicros, u.Steps, 0, 0, 0, 0))
	}
	args := append(ceilingArgs(c), r.treeTTL, packUsage(sum)+pack(0, 0, 0, 0), len(spent))
	args = append(args, agents...)
	rep, err := r.run(ctx, "restore", restoreScript, r.placeKeys(tree), args...)
	if err != nil {
		return false, err
	}
	return rep == "1", nil
}
