// Package ledger is the shared budget of an agent tree: a root run and the
// sub-agents it spawns, possibly on many machines, draw input and output
// tokens, cost, steps and time from one ceiling that no agent of the tree
// can raise, each also within its own cap; and take turns at the places
// that bound how many of them run at once.
//
// Two implementations pass one conformance suite (package ledgertest):
// Redis, where every draw is one atomic Lua script, for a deployment of
// many processes; and Memory, for the embedded default.
//
// # The caller's steps
//
//  1. When the root run starts, Open the tree (named by the root's run
//     id) with its Ceiling, then Register the root at depth 0. Open is
//     idempotent and never raises an existing ceiling.
//  2. Before spawning a sub-agent, Register it with its depth. A *Refusal
//     matching ErrAgentCap, ErrDepthCap or ErrCeilingReached answers the
//     spawn: tell the parent agent, do not start the child.
//  3. Where the root's contract caps how many agents of the tree run at
//     once, hold the root's place with a Running TakePlace, and take one
//     for each sub-agent before submitting it: a Place not Held is a turn
//     in the queue, first come first served; ask again (PlaceWatcher tells
//     when a place was given) until it is held, and FreePlace to leave the
//     queue. Claim the sub-agent's place with a Running TakePlace once it
//     is seen started, and FreePlace it when it finishes; FreePlace is
//     idempotent, so every finish path may call it.
//  4. Before every provider call, Reserve an estimate: the request's input
//     tokens, its max output tokens, their cost (Prices.Cost) and one step,
//     with the run's own caps in Reservation.Cap, under an idempotency key
//     derived from (run, step, attempt). Call the provider only if Reserve
//     returned a grant in StateReserved. A *Refusal matching ErrRunCap
//     ends the run cost_budget_exceeded; one matching ErrCeilingReached
//     (a ceiling or the tree's deadline) ends it budget_ceiling_reached,
//     and every other agent of the tree will meet the same refusal at its
//     next draw. Refusal.Outcome names the outcome.
//  5. After the call, Settle the key with the usage the provider reported
//     (it may exceed the estimate; the excess is what concurrent agents
//     can overrun a ceiling by). Record the Settlement in the step's trace:
//     it carries what was drawn and what remains, for the spend_draw
//     event. SettleAndReserve settles a step and reserves the next in one
//     round trip.
//  6. If the call failed without usage, Release the key.
//  7. On resume, settle (with the usage the trace recorded) or release
//     every key reserved and not settled; replays of Reserve and Settle
//     with the same key return the first answer and charge nothing more,
//     so retries, redeliveries and resumes never double-charge.
//  8. If any call returns ErrTreeUnknown, the store lost the tree (a Redis
//     restart without persistence, a failover, an expiry): rebuild it with
//     Restore from the spend the trace recorded per agent, with the
//     original ceiling and start, record the rebuild as an event, and try
//     again. Restore creates the tree only if it is absent, so agents
//     racing to rebuild do not undo each other.
//  9. If a call returns an error matching protocol.ErrUnavailable, the
//     ledger could not be reached. Fail closed: make no provider call
//     without a reservation; wait with backoff, report why, and try again
//     with the same key.
//
// # Guarantees
//
// Every check and update of one draw is atomic, across processes for
// Redis. A reservation is granted only if the tree's spent plus reserved
// plus the estimate fits every ceiling and the agent's spent plus reserved
// plus the estimate fits every cap, and never once a ceiling is used up,
// so concurrent agents together overrun a ceiling by at most what their
// reservations in flight under-estimated. Redis holds counters only; the
// trace holds the truth, and Restore rebuilds from it.
package ledger
