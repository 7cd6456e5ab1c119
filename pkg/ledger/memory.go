package ledger

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// DefaultKeyTTL is how long an idempotency key is remembered by default.
const DefaultKeyTTL = 24 * time.Hour

// Memory is a Ledger in one process's memory, for the embedded default:
// the same semantics as Redis under one mutex, and nothing survives the
// process. The zero value is ready to use; set the fields before the first
// call and do not change them after.
type Memory struct {
	// KeyTTL is how long an idempotency key is remembered after its
	// reservation; default DefaultKeyTTL. As with Redis, a reservation
	// neither settled nor released within KeyTTL stays counted as
	// reserved.
	KeyTTL time.Duration
	// Now returns the current time, for a tree's start when Open is given
	// none, its deadline, and key expiry; default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	trees   map[string]*memTree
	keys    map[memKeyID]*memKey
	sweepAt int // sweep expired keys once len(keys) reaches this
	// watchers are the channels of WatchPlaces by tree, kept across a
	// Restore.
	watchers map[string]map[chan struct{}]struct{}
}

var _ Ledger = (*Memory)(nil)

// NewMemory returns an empty Memory with the defaults.
func NewMemory() *Memory { return &Memory{} }

type memTree struct {
	ceiling  Ceiling
	spent    Usage
	reserved Usage
	agents   map[string]*AgentTotals
	places   memPlaces
}

// memPlaces are a tree's places (TakePlace): who holds one, until when
// unless claimed (zero: until freed), and who waits for one.
type memPlaces struct {
	limit int
	held  map[string]time.Time
	queue []memQueued
}

type memQueued struct {
	agent   string
	expires time.Time     // unless it asks again
	claim   time.Duration // how long the place it is given is kept unclaimed
}

type memKeyID struct{ tree, key string }

type memKey struct {
	agent   string
	est     Usage
	state   State
	grant   Grant
	settled Settlement
	expires time.Time
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Memory) keyTTL() time.Duration {
	if m.KeyTTL > 0 {
		return m.KeyTTL
	}
	return DefaultKeyTTL
}

// init makes the maps; the caller holds m.mu.
func (m *Memory) init() {
	if m.trees == nil {
		m.trees = make(map[string]*memTree)
		m.keys = make(map[memKeyID]*memKey)
		m.sweepAt = 1024
	}
}

// key returns the live record of key, forgetting it if it expired; the
// caller holds m.mu.
func (m *Memory) key(tree, key string) *memKey {
	id := memKeyID{tree, key}
	k := m.keys[id]
	if k != nil && !m.now().Before(k.expires) {
		delete(m.keys, id)
		return nil
	}
	return k
}

// putKey stores a record, sweeping expired ones when the map has doubled
// since the last sweep, so memory stays proportional to live keys; the
// caller holds m.mu.
func (m *Memory) putKey(tree, key string, k *memKey) {
	m.keys[memKeyID{tree, key}] = k
	if len(m.keys) < m.sweepAt {
		return
	}
	now := m.now()
	maps.DeleteFunc(m.keys, func(_ memKeyID, k *memKey) bool { return !now.Before(k.expires) })
	m.sweepAt = max(1024, 2*len(m.keys))
}

// deadlinePassed returns the refusal for a tree past its deadline, or nil.
func (m *Memory) deadlinePassed(tree string, t *memTree) *Refusal {
	dl, ok := t.ceiling.Deadline()
	if !ok || m.now().Before(dl) {
		return nil
	}
	return &Refusal{Tree: tree, Scope: ScopeTree, Dimension: DimWall, Limit: t.ceiling.Wall.Microseconds(), Deadline: dl}
}

// Open implements Ledger.
func (m *Memory) Open(ctx context.Context, tree string, c Ceiling) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateCeiling(c); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	if m.trees[tree] != nil {
		return nil
	}
	c.Start = normalizeStart(c.Start, m.now())
	c.Wall = c.Wall.Truncate(time.Microsecond)
	m.trees[tree] = &memTree{ceiling: c, agents: make(map[string]*AgentTotals)}
	return nil
}

// Register implements Ledger.
func (m *Memory) Register(ctx context.Context, tree, agent string, depth int) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateID("agent", agent); err != nil {
		return err
	}
	if err := validateAmount("depth", int64(depth)); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	t := m.trees[tree]
	if t == nil {
		return ErrTreeUnknown
	}
	if a := t.agents[agent]; a != nil {
		if a.Depth < 0 {
			a.Depth = depth
		}
		return nil
	}
	if r := m.deadlinePassed(tree, t); r != nil {
		r.Agent = agent
		return r
	}
	c := t.ceiling
	if c.Depth > 0 && depth > c.Depth {
		return &Refusal{Tree: tree, Agent: agent, Scope: ScopeTree, Dimension: DimDepth, Asked: int64(depth), Limit: int64(c.Depth)}
	}
	if c.Agents > 0 && len(t.agents) >= c.Agents {
		return &Refusal{Tree: tree, Agent: agent, Scope: ScopeTree, Dimension: DimAgents, Asked: 1, Limit: int64(c.Agents)}
	}
	if r := over(ScopeTree, c.Limits, t.spent.Add(t.reserved), Usage{}); r != nil {
		r.Tree, r.Agent = tree, agent
		return r
	}
	t.agents[agent] = &AgentTotals{Depth: depth}
	return nil
}

// Reserve implements Ledger.
func (m *Memory) Reserve(ctx context.Context, r Reservation) (Grant, error) {
	if err := validateReservation(r); err != nil {
		return Grant{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	return m.reserve(r)
}

// reserve is Reserve with m.mu held.
func (m *Memory) reserve(r Reservation) (Grant, error) {
	if k := m.key(r.Tree, r.Key); k != nil {
		g := k.grant
		g.State, g.Replayed = k.state, true
		return g, nil
	}
	t := m.trees[r.Tree]
	if t == nil {
		return Grant{}, ErrTreeUnknown
	}
	a := t.agents[r.Agent]
	if a == nil {
		return Grant{}, ErrAgentUnknown
	}
	if ref := m.deadlinePassed(r.Tree, t); ref != nil {
		ref.Agent = r.Agent
		return Grant{}, ref
	}
	if ref := over(ScopeTree, t.ceiling.Limits, t.spent.Add(t.reserved), r.Estimate); ref != nil {
		ref.Tree, ref.Agent = r.Tree, r.Agent
		return Grant{}, ref
	}
	if ref := over(ScopeRun, r.Cap, a.Spent.Add(a.Reserved), r.Estimate); ref != nil {
		ref.Tree, ref.Agent = r.Tree, r.Agent
		return Grant{}, ref
	}
	t.reserved = t.reserved.Add(r.Estimate)
	a.Reserved = a.Reserved.Add(r.Estimate)
	g := Grant{Key: r.Key, Reserved: r.Estimate, Balance: t.balance(a), State: StateReserved}
	m.putKey(r.Tree, r.Key, &memKey{agent: r.Agent, est: r.Estimate, state: StateReserved, grant: g, expires: m.now().Add(m.keyTTL())})
	return g, nil
}

func (t *memTree) balance(a *AgentTotals) Balance {
	return Balance{
		Spent: t.spent, Reserved: t.reserved,
		AgentSpent: a.Spent, AgentReserved: a.Reserved,
		Remaining: remaining(t.ceiling.Limits, t.spent, t.reserved),
	}
}

// Settle implements Ledger.
func (m *Memory) Settle(ctx context.Context, tree, key string, actual Usage) (Settlement, error) {
	if err := validateSettle(tree, key, actual); err != nil {
		return Settlement{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	return m.settle(tree, key, actual)
}

// settle is Settle with m.mu held.
func (m *Memory) settle(tree, key string, actual Usage) (Settlement, error) {
	k := m.key(tree, key)
	t := m.trees[tree]
	switch {
	case k == nil && t == nil:
		return Settlement{}, ErrTreeUnknown
	case k == nil:
		return Settlement{}, ErrReservationUnknown
	case k.state == StateSettled:
		s := k.settled
		s.Replayed = true
		return s, nil
	case k.state == StateReleased:
		return Settlement{}, ErrReleased
	case t == nil:
		return Settlement{}, ErrTreeUnknown
	}
	a := t.agents[k.agent]
	t.reserved = t.reserved.Sub(k.est)
	t.spent = t.spent.Add(actual)
	a.Reserved = a.Reserved.Sub(k.est)
	a.Spent = a.Spent.Add(actual)
	k.state = StateSettled
	k.settled = Settlement{Key: key, Charged: actual, Balance: t.balance(a)}
	return k.settled, nil
}

// SettleAndReserve implements Ledger.
func (m *Memory) SettleAndReserve(ctx context.Context, key string, actual Usage, next Reservation) (Settlement, Grant, error) {
	if err := validateSettleAndReserve(key, actual, next); err != nil {
		return Settlement{}, Grant{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	s, err := m.settle(next.Tree, key, actual)
	if err != nil {
		return Settlement{}, Grant{}, err
	}
	g, err := m.reserve(next)
	return s, g, err
}

// Release implements Ledger.
func (m *Memory) Release(ctx context.Context, tree, key string) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateID("key", key); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	k := m.key(tree, key)
	t := m.trees[tree]
	switch {
	case k == nil && t == nil:
		return ErrTreeUnknown
	case k == nil:
		return ErrReservationUnknown
	case k.state != StateReserved:
		return nil
	case t == nil:
		return ErrTreeUnknown
	}
	a := t.agents[k.agent]
	t.reserved = t.reserved.Sub(k.est)
	a.Reserved = a.Reserved.Sub(k.est)
	k.state = StateReleased
	return nil
}

// Totals implements Ledger.
func (m *Memory) Totals(ctx context.Context, tree string) (Totals, error) {
	if err := validateTree(tree); err != nil {
		return Totals{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	t := m.trees[tree]
	if t == nil {
		return Totals{}, ErrTreeUnknown
	}
	out := Totals{
		Tree: tree, Ceiling: t.ceiling, Spent: t.spent, Reserved: t.reserved,
		Remaining: remaining(t.ceiling.Limits, t.spent, t.reserved),
		Agents:    make(map[string]AgentTotals, len(t.agents)),
	}
	for id, a := range t.agents {
		out.Agents[id] = *a
	}
	out.Places, out.Queued = t.places.lists(m.now())
	return out, nil
}

// Restore implements Ledger.
func (m *Memory) Restore(ctx context.Context, tree string, c Ceiling, spent map[string]Usage) (bool, error) {
	if err := validateRestore(tree, c, spent); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	if m.trees[tree] != nil {
		return false, nil
	}
	c.Start = normalizeStart(c.Start, m.now())
	c.Wall = c.Wall.Truncate(time.Microsecond)
	t := &memTree{ceiling: c, agents: make(map[string]*AgentTotals, len(spent))}
	for id, u := range spent {
		t.agents[id] = &AgentTotals{Depth: -1, Spent: u}
		t.spent = t.spent.Add(u)
	}
	m.trees[tree] = t
	return true, nil
}

var _ PlaceWatcher = (*Memory)(nil)

// TakePlace implements Ledger.
func (m *Memory) TakePlace(ctx context.Context, p PlaceRequest) (Place, error) {
	if err := validatePlace(p); err != nil {
		return Place{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	t := m.trees[p.Tree]
	if t == nil {
		return Place{}, ErrTreeUnknown
	}
	now := m.now()
	pl := &t.places
	pl.limit = p.Limit
	if pl.held == nil {
		pl.held = make(map[string]time.Time)
	}
	m.handOn(p.Tree, pl, now)
	_, mine := pl.held[p.Agent]
	at := slices.IndexFunc(pl.queue, func(q memQueued) bool { return q.agent == p.Agent })
	switch {
	case p.Running:
		if at >= 0 {
			pl.queue = slices.Delete(pl.queue, at, at+1)
		}
		pl.held[p.Agent] = time.Time{}
	case mine:
	case at >= 0:
		pl.queue[at].expires = now.Add(p.Keep)
		return Place{Ahead: at, Taken: len(pl.held)}, nil
	case p.Limit == 0 || len(pl.held) < p.Limit:
		pl.held[p.Agent] = until(now, p.Claim)
	default:
		pl.queue = append(pl.queue, memQueued{agent: p.Agent, expires: now.Add(p.Keep), claim: p.Claim})
		return Place{Ahead: len(pl.queue) - 1, Taken: len(pl.held)}, nil
	}
	return Place{Held: true, Taken: len(pl.held)}, nil
}

// until is when a place given at now is kept to unless claimed: zero for
// until freed.
func until(now time.Time, claim time.Duration) time.Time {
	if claim <= 0 {
		return time.Time{}
	}
	return now.Add(claim)
}

// FreePlace implements Ledger.
func (m *Memory) FreePlace(ctx context.Context, tree, agent string) (bool, error) {
	if err := validateTree(tree); err != nil {
		return false, err
	}
	if err := validateID("agent", agent); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	t := m.trees[tree]
	if t == nil {
		return false, ErrTreeUnknown
	}
	pl := &t.places
	_, freed := pl.held[agent]
	delete(pl.held, agent)
	if at := slices.IndexFunc(pl.queue, func(q memQueued) bool { return q.agent == agent }); at >= 0 {
		pl.queue = slices.Delete(pl.queue, at, at+1)
		freed = true
	}
	m.handOn(tree, pl, m.now())
	return freed, nil
}

// handOn forgets the places and turns that lapsed by now and gives the
// free places to the first agents queued, telling the tree's watchers;
// the caller holds m.mu.
func (m *Memory) handOn(tree string, pl *memPlaces, now time.Time) {
	maps.DeleteFunc(pl.held, func(_ string, exp time.Time) bool { return !exp.IsZero() && !now.Before(exp) })
	pl.queue = slices.DeleteFunc(pl.queue, func(q memQueued) bool { return !now.Before(q.expires) })
	given := 0
	for len(pl.queue) > 0 && (pl.limit == 0 || len(pl.held) < pl.limit) {
		q := pl.queue[0]
		pl.queue = pl.queue[1:]
		pl.held[q.agent] = until(now, q.claim)
		given++
	}
	if given == 0 {
		return
	}
	for ch := range m.watchers[tree] {
		select {
		case ch <- struct{}{}:
		default: // one notice pending is enough
		}
	}
}

// WatchPlaces implements PlaceWatcher.
func (m *Memory) WatchPlaces(ctx context.Context, tree string) (<-chan struct{}, error) {
	if err := validateTree(tree); err != nil {
		return nil, err
	}
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watchers == nil {
		m.watchers = make(map[string]map[chan struct{}]struct{})
	}
	if m.watchers[tree] == nil {
		m.watchers[tree] = make(map[chan struct{}]struct{})
	}
	m.watchers[tree][ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers[tree], ch)
		if len(m.watchers[tree]) == 0 {
			delete(m.watchers, tree)
		}
	})
	return ch, nil
}

// lists returns who holds a place, sorted, and who waits for one, in
// order, nil when none; the caller holds m.mu.
func (pl *memPlaces) lists(now time.Time) (held, queued []string) {
	for a, exp := range pl.held {
		if exp.IsZero() || now.Before(exp) {
			held = append(held, a)
		}
	}
	slices.Sort(held)
	for _, q := range pl.queue {
		if now.Before(q.expires) {
			queued = append(queued, q.agent)
		}
	}
	return held, queued
}
