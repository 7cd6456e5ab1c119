package ledger

import (
	"context"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Ledger is the plugin boundary for a tree's shared budget. Two
// implementations exist: Redis (shared by every machine of a deployment)
// and Memory (one process, the embedded default). Both pass the conformance
// suite in package ledgertest.
//
// A tree is named by its root run's id, an agent by its own run id, and a
// draw by an idempotency key the caller derives from (run, step, attempt).
// Every method is safe for concurrent use by many goroutines and, for
// Redis, many processes.
//
// Errors common to every method:
//   - a *protocol.Error with CodeInvalidField (matching
//     protocol.ErrInvalidField) when an id is empty or an amount is
//     negative or too large;
//   - an error matching protocol.ErrUnavailable when the store did not
//     answer (Redis unreachable, timed out, failing over). The ledger fails
//     closed: the caller must not call a provider, and should wait with
//     backoff and try again;
//   - ErrTreeUnknown when the tree has no state: it was never opened, or the
//     store lost its keys. The caller rebuilds it with Restore from the
//     trace and tries again.
type Ledger interface {
	// Open creates the tree's ceiling, once, when the root run starts. If
	// the tree exists already Open does nothing and returns nil: a second
	// Open, even with a larger ceiling, cannot raise it. A zero c.Start
	// means now. Open must not be used to resume a tree whose keys may be
	// lost; that is Restore's job.
	Open(ctx context.Context, tree string, c Ceiling) error

	// Register admits an agent to the tree at depth (the root is 0, its
	// children 1, and so on). It is idempotent by agent: registering an
	// agent again returns nil and counts it once. It refuses with a
	// *Refusal matching ErrDepthCap if depth exceeds the ceiling's Depth,
	// ErrAgentCap if the tree already has Agents agents, and
	// ErrCeilingReached if the deadline has passed or a capped dimension
	// has nothing left.
	Register(ctx context.Context, tree, agent string, depth int) error

	// Reserve holds r.Estimate against the tree's ceiling and the agent's
	// own caps r.Cap, atomically, before a provider call. The call may
	// happen only if Reserve returns a nil error. It refuses with a
	// *Refusal matching ErrCeilingReached (the tree's ceiling or deadline)
	// or ErrRunCap (the agent's own cap); nothing is held then. It returns
	// ErrAgentUnknown if the agent was not registered. Replaying a key
	// returns the first grant with Replayed set and its current State, and
	// holds nothing more; a refusal is not remembered, so a replay of a
	// refused key is decided afresh.
	Reserve(ctx context.Context, r Reservation) (Grant, error)

	// Settle replaces the reservation under key with the usage the
	// provider reported, which may exceed the estimate. Replaying a settled
	// key returns the first settlement with Replayed set and charges
	// nothing more, whatever actual says. It returns
	// ErrReservationUnknown if the key was never reserved or has expired,
	// and ErrReleased if the reservation was released.
	Settle(ctx context.Context, tree, key string, actual Usage) (Settlement, error)

	// SettleAndReserve settles key with actual and then reserves next, in
	// one atomic step (one round trip on Redis), with the semantics of
	// Settle followed by Reserve; next.Tree names the tree of both. If the
	// settle fails (ErrTreeUnknown, ErrReservationUnknown, ErrReleased)
	// nothing is done and the Settlement is zero. If the settle succeeds
	// (or replays) and the reservation fails (a *Refusal, ErrAgentUnknown,
	// ErrTreeUnknown), the settlement stands and is returned with the
	// reservation's error and a zero Grant. It is invalid to reuse key as
	// next.Key.
	SettleAndReserve(ctx context.Context, key string, actual Usage, next Reservation) (Settlement, Grant, error)

	// Release returns the reservation under key without charging it, when
	// the provider call did not happen or failed without usage. Releasing
	// a released or settled key does nothing and returns nil (a settled
	// key stays charged). It returns ErrReservationUnknown if the key was
	// never reserved or has expired.
	Release(ctx context.Context, tree, key string) error

	// Totals reports the tree's ceiling, what is spent and reserved, what
	// remains, and the same per agent.
	Totals(ctx context.Context, tree string) (Totals, error)

	// Restore rebuilds a tree whose state was lost, from what the trace
	// says each agent spent: the ceiling c (with the root's original
	// Start, or the deadline moves), the per-agent spend, the agents
	// registered (every key of spent, including those with zero usage),
	// and nothing reserved. Reservations in flight at the loss are gone:
	// settling them returns ErrReservationUnknown and the trace, which has
	// their usage, counts them at the next rebuild. Restore creates the
	// tree only if it is absent, so of several callers racing to rebuild
	// one wins; it reports whether this call rebuilt it.
	Restore(ctx context.Context, tree string, c Ceiling, spent map[string]Usage) (bool, error)

	// TakePlace gives p.Agent one of the tree's p.Limit places, the bound
	// on how many of its agents run at once, or queues it behind those
	// who asked first. An agent holding a place keeps it until FreePlace
	// (or, for a place not claimed yet, until p.Claim passes); a queued
	// agent keeps its turn only if it asks again within p.Keep, and is
	// given a place, first come first served, as places are freed: its
	// next TakePlace reports it held. Asking again while holding or
	// queued changes nothing but the queued turn's Keep. A Running take
	// holds a place at once, over the limit if need be, and takes the
	// agent out of the queue. The tree must exist (ErrTreeUnknown), but
	// the agent need not be registered: a place is taken before a
	// sub-agent is submitted.
	TakePlace(ctx context.Context, p PlaceRequest) (Place, error)

	// FreePlace gives the agent's place back, or takes it out of the
	// queue, and hands the freed place to the first agent queued. It is
	// idempotent by agent: it reports whether the agent held a place or
	// was queued, and freeing it again frees nothing. It returns
	// ErrTreeUnknown if the tree does not exist.
	FreePlace(ctx context.Context, tree, agent string) (bool, error)
}

// PlaceWatcher is implemented by ledgers that can tell a queued agent
// when a place may have been given, so that it need not only poll
// TakePlace. Both Memory and Redis implement it.
type PlaceWatcher interface {
	// WatchPlaces returns a channel that receives (a value at most
	// pending, however many places were given meanwhile) each time a
	// place of the tree is given to a queued agent, until ctx ends. A
	// notice may be lost (a Redis connection that drops): a waiter still
	// asks TakePlace again now and then.
	WatchPlaces(ctx context.Context, tree string) (<-chan struct{}, error)
}

// PlaceRequest asks for one of the places of a tree whose agents may run
// only so many at once (a contract's budget.tree.max_concurrent).
type PlaceRequest struct {
	// Tree is the root run's id.
	Tree string `json:"tree"`
	// Agent is the run that is to hold the place.
	Agent string `json:"agent"`
	// Limit is how many places the tree has, 0 for no cap. The caller
	// reads it from the root's contract, the only place it is set, and
	// passes the same in every request of the tree; the latest is the one
	// a freed place is handed on under.
	Limit int `json:"limit"`
	// Running holds a place for an agent that runs already (the root, or
	// a sub-agent found started): at once, over Limit if need be, kept
	// until freed. A place the agent held unclaimed is claimed by it.
	Running bool `json:"running,omitempty"`
	// Claim is how long a place given to an agent that has not started
	// is kept for it unclaimed (a Running take claims it); zero keeps it
	// until freed. An agent whose starter died before starting it so
	// holds no place for ever.
	Claim time.Duration `json:"claim,omitempty"`
	// Keep is how long a queued agent keeps its turn after it last asked.
	// It must be positive unless Running.
	Keep time.Duration `json:"keep,omitempty"`
}

// Place is where an agent stands for one of its tree's places.
type Place struct {
	// Held is true when the agent holds one of the places.
	Held bool `json:"held"`
	// Ahead is how many agents are queued before it, when it does not
	// hold a place.
	Ahead int `json:"ahead,omitempty"`
	// Taken is how many of the tree's places are held, its own included.
	Taken int `json:"taken"`
}

// Usage is an amount in every drawable dimension: what a reservation holds,
// what a provider call used, what a tree has spent.
type Usage struct {
	// InputTokens counts prompt tokens.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens counts completion tokens.
	OutputTokens int64 `json:"output_tokens"`
	// CostMicros is the cost in micro-units of the price table's currency
	// (1,000,000 = one unit); see Prices.
	CostMicros int64 `json:"cost_micros"`
	// Steps counts provider calls (one per agent step).
	Steps int64 `json:"steps"`
}

// Tokens returns input plus output tokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// Add returns u + v in every dimension.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.InputTokens + v.InputTokens, u.OutputTokens + v.OutputTokens, u.CostMicros + v.CostMicros, u.Steps + v.Steps}
}

// Sub returns u − v in every dimension.
func (u Usage) Sub(v Usage) Usage {
	return Usage{u.InputTokens - v.InputTokens, u.OutputTokens - v.OutputTokens, u.CostMicros - v.CostMicros, u.Steps - v.Steps}
}

// Limits caps the drawable dimensions. A zero field means no cap in that
// dimension.
type Limits struct {
	// InputTokens caps prompt tokens.
	InputTokens int64 `json:"input_tokens,omitempty"`
	// OutputTokens caps completion tokens.
	OutputTokens int64 `json:"output_tokens,omitempty"`
	// Tokens caps input plus output tokens.
	Tokens int64 `json:"tokens,omitempty"`
	// CostMicros caps cost in micro-units.
	CostMicros int64 `json:"cost_micros,omitempty"`
	// Steps caps provider calls.
	Steps int64 `json:"steps,omitempty"`
}

// Unlimited is the value a Remaining field takes in a dimension without a
// cap.
const Unlimited int64 = -1

// Ceiling is a tree's budget, fixed when the root starts. Zero fields mean
// no cap.
type Ceiling struct {
	// Limits caps the tree's total draws in each dimension.
	Limits
	// Agents caps how many agents the tree may register, the root
	// included; 1 forbids sub-agents.
	Agents int `json:"agents,omitempty"`
	// Depth caps an agent's depth below the root (the root is depth 0).
	Depth int `json:"depth,omitempty"`
	// Wall is how long after Start the tree may keep drawing; Reserve
	// refuses from Start+Wall on.
	Wall time.Duration `json:"wall,omitempty"`
	// Start is when the root run started. Open fills in the time of the
	// first Open when it is zero; Restore needs the original. It is kept
	// to the microsecond.
	Start time.Time `json:"start,omitzero"`
}

// Deadline returns Start+Wall, and false if the tree has no deadline.
func (c Ceiling) Deadline() (time.Time, bool) {
	if c.Wall <= 0 {
		return time.Time{}, false
	}
	return c.Start.Add(c.Wall), true
}

// Reservation asks to hold an estimate before a provider call.
type Reservation struct {
	// Tree is the root run's id.
	Tree string `json:"tree"`
	// Agent is the drawing run's id; it must be registered.
	Agent string `json:"agent"`
	// Key makes the draw idempotent: derive it from (run, step, attempt),
	// such as "r1.7.0". It is remembered for the ledger's key TTL.
	Key string `json:"key"`
	// Estimate is what the call may use at most: the request's input
	// tokens, its max output tokens, their cost and one step.
	Estimate Usage `json:"estimate"`
	// Cap is the agent's own budget, checked against what the agent has
	// spent and holds, in the same atomic step as the tree's ceiling. It
	// can only lower what the agent may draw, never raise the tree's
	// ceiling.
	Cap Limits `json:"cap,omitzero"`
}

// State is where a reservation stands.
type State string

// Reservation states.
const (
	StateReserved State = "reserved" // held, awaiting Settle or Release
	StateSettled  State = "settled"  // replaced by actual usage
	StateReleased State = "released" // returned uncharged
)

// Balance is the tree's and the agent's standing right after a draw: what
// a spend_draw event reports.
type Balance struct {
	// Spent is what the tree's settled draws used.
	Spent Usage `json:"spent"`
	// Reserved is what the tree's reservations in flight hold.
	Reserved Usage `json:"reserved"`
	// AgentSpent is what the drawing agent's settled draws used.
	AgentSpent Usage `json:"agent_spent"`
	// AgentReserved is what the drawing agent's reservations hold.
	AgentReserved Usage `json:"agent_reserved"`
	// Remaining is what the tree's ceiling still allows: the ceiling minus
	// Spent and Reserved, never below zero, Unlimited where there is no
	// cap.
	Remaining Limits `json:"remaining"`
}

// AgentRemaining returns what the agent's own cap still allows, with the
// same conventions as Remaining.
func (b Balance) AgentRemaining(cap Limits) Limits {
	return remaining(cap, b.AgentSpent, b.AgentReserved)
}

// Grant is a reservation Reserve made.
type Grant struct {
	// Key is the reservation's idempotency key.
	Key string `json:"key"`
	// Reserved is the estimate held.
	Reserved Usage `json:"reserved"`
	// Balance is the standing right after the reservation was made; a
	// replay returns the same.
	Balance Balance `json:"balance"`
	// State is where the reservation stands now: StateReserved for a
	// fresh grant; a replay may find it settled or released, and then the
	// caller holds nothing and must not call the provider on its
	// strength.
	State State `json:"state"`
	// Replayed is true when the key had been granted before and this is
	// the first answer again.
	Replayed bool `json:"replayed,omitempty"`
}

// Settlement is a reservation replaced by actual usage.
type Settlement struct {
	// Key is the reservation's idempotency key.
	Key string `json:"key"`
	// Charged is the usage charged: the actual of the first Settle.
	Charged Usage `json:"charged"`
	// Balance is the standing right after the settlement; a replay returns
	// the same.
	Balance Balance `json:"balance"`
	// Replayed is true when the key had been settled before and this is
	// the first answer again.
	Replayed bool `json:"replayed,omitempty"`
}

// Totals is a tree's standing as a whole and per agent.
type Totals struct {
	// Tree is the root run's id.
	Tree string `json:"tree"`
	// Ceiling is the tree's ceiling, with its Start.
	Ceiling Ceiling `json:"ceiling"`
	// Spent is what the tree's settled draws used.
	Spent Usage `json:"spent"`
	// Reserved is what reservations in flight hold.
	Reserved Usage `json:"reserved"`
	// Remaining is what the ceiling still allows, as in Balance.
	Remaining Limits `json:"remaining"`
	// Agents holds every registered agent's standing by run id.
	Agents map[string]AgentTotals `json:"agents"`
	// Places lists the agents holding one of the tree's places, sorted,
	// and Queued those waiting for one, first come first; both are nil
	// when empty.
	Places []string `json:"places,omitempty"`
	Queued []string `json:"queued,omitempty"`
}

// AgentTotals is one agent's standing.
type AgentTotals struct {
	// Depth is the agent's depth below the root, or -1 if it was restored
	// by Restore and has not registered again since.
	Depth int `json:"depth"`
	// Spent is what the agent's settled draws used.
	Spent Usage `json:"spent"`
	// Reserved is what the agent's reservations in flight hold.
	Reserved Usage `json:"reserved"`
}

// MaxAmount bounds every amount, estimate, cap and ceiling, so that sums
// stay exact in Redis's Lua numbers (doubles, exact below 2^53).
const MaxAmount int64 = 1 << 50

// validate checks the parts every implementation checks the same way.
func validateTree(tree string) error {
	if tree == "" {
		return protocol.FieldError(protocol.CodeInvalidField, "tree", "pass the root run's id", "the tree id is empty")
	}
	for i := 0; i < len(tree); i++ {
		if tree[i] == '{' || tree[i] == '}' {
			return protocol.FieldError(protocol.CodeInvalidField, "tree", "use a run id, which has no braces", "the tree id %q contains a brace", tree)
		}
	}
	return nil
}

func validateID(field, id string) error {
	if id == "" {
		return protocol.FieldError(protocol.CodeInvalidField, field, "pass a non-empty id", "the %s is empty", field)
	}
	return nil
}

func validateAmount(field string, v int64) error {
	if !inRange(v) {
		return protocol.FieldError(protocol.CodeInvalidField, field, "use a value from 0 to 2^50", "%s is %d", field, v)
	}
	return nil
}

func validateUsage(field string, u Usage) error {
	if inRange(u.InputTokens) && inRange(u.OutputTokens) && inRange(u.CostMicros) && inRange(u.Steps) {
		return nil // the common case, without building field names
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens}, {"cost_micros", u.CostMicros}, {"steps", u.Steps}} {
		if err := validateAmount(field+"."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func validateLimits(field string, l Limits) error {
	if inRange(l.InputTokens) && inRange(l.OutputTokens) && inRange(l.Tokens) && inRange(l.CostMicros) && inRange(l.Steps) {
		return nil
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"input_tokens", l.InputTokens}, {"output_tokens", l.OutputTokens}, {"tokens", l.Tokens}, {"cost_micros", l.CostMicros}, {"steps", l.Steps}} {
		if err := validateAmount(field+"."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func inRange(v int64) bool { return v >= 0 && v <= MaxAmount }

func validateCeiling(c Ceiling) error {
	if err := validateLimits("ceiling", c.Limits); err != nil {
		return err
	}
	if c.Agents < 0 || int64(c.Agents) > MaxAmount {
		return protocol.FieldError(protocol.CodeInvalidField, "ceiling.agents", "use 0 for no cap or a positive count", "agents is %d", c.Agents)
	}
	if c.Depth < 0 || int64(c.Depth) > MaxAmount {
		return protocol.FieldError(protocol.CodeInvalidField, "ceiling.depth", "use 0 for no cap or a positive depth", "depth is %d", c.Depth)
	}
	if c.Wall < 0 {
		return protocol.FieldError(protocol.CodeInvalidField, "ceiling.wall", "use 0 for no deadline or a positive duration", "wall is %v", c.Wall)
	}
	return nil
}

func validateReservation(r Reservation) error {
	if err := validateTree(r.Tree); err != nil {
		return err
	}
	if err := validateID("agent", r.Agent); err != nil {
		return err
	}
	if err := validateID("key", r.Key); err != nil {
		return err
	}
	if err := validateUsage("estimate", r.Estimate); err != nil {
		return err
	}
	return validateLimits("cap", r.Cap)
}

// normalizeStart keeps a start time to the microsecond, as Redis stores it,
// with now for a zero time.
func normalizeStart(start, now time.Time) time.Time {
	if start.IsZero() {
		start = now
	}
	return time.UnixMicro(start.UnixMicro())
}

func validateSettle(tree, key string, actual Usage) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateID("key", key); err != nil {
		return err
	}
	return validateUsage("actual", actual)
}

func validateSettleAndReserve(key string, actual Usage, next Reservation) error {
	if err := validateSettle(next.Tree, key, actual); err != nil {
		return err
	}
	if err := validateReservation(next); err != nil {
		return err
	}
	if key == next.Key {
		return protocol.FieldError(protocol.CodeInvalidField, "key", "give the next step its own key", "the next reservation reuses the settled key %q", key)
	}
	return nil
}

func validateRestore(tree string, c Ceiling, spent map[string]Usage) error {
	if err := validateTree(tree); err != nil {
		return err
	}
	if err := validateCeiling(c); err != nil {
		return err
	}
	for id, u := range spent {
		if err := validateID("agent", id); err != nil {
			return err
		}
		if err := validateUsage("spent", u); err != nil {
			return err
		}
	}
	return nil
}

// maxPlaceTTL bounds a place request's Claim and Keep.
const maxPlaceTTL = 7 * 24 * time.Hour

func validatePlace(p PlaceRequest) error {
	if err := validateTree(p.Tree); err != nil {
		return err
	}
	if err := validateID("agent", p.Agent); err != nil {
		return err
	}
	if err := validateAmount("limit", int64(p.Limit)); err != nil {
		return err
	}
	if p.Claim < 0 || p.Claim > maxPlaceTTL {
		return protocol.FieldError(protocol.CodeInvalidField, "claim", "use 0 to keep the place until freed, or a duration up to a week", "claim is %v", p.Claim)
	}
	if p.Keep < 0 || p.Keep > maxPlaceTTL || (p.Keep < time.Millisecond && !p.Running) {
		return protocol.FieldError(protocol.CodeInvalidField, "keep", "give a queued agent from 1ms to a week to ask again", "keep is %v", p.Keep)
	}
	return nil
}
