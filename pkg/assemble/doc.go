// Package assemble fits one provider request of an agent run into a token
// budget, by the rules of io-harness's context assembly (§2.13) adapted to
// a transcript of messages. It is a pure function of its Input: no I/O, no
// clock, no randomness, so every coordinator, a resumed run and a replay
// assemble the same request from the same trace, byte for byte.
//
// The caller's steps, for each request of a run:
//
//  1. Fold the run's committed steps into Input.Steps (each turn, its
//     results in call order, the user messages after them), with the
//     workspace's memory as Notes and Budget from Effective (the model's
//     Window, capped by its share of what a token budget has left).
//  2. Call Assemble. When Output.Stale is empty, send Output.Messages.
//  3. Otherwise read each stale path again, through the run's policy, and
//     call Assemble once more with what each holds now in Input.Fresh
//     (keyed by the earlier read's call id; a refusal's explanation serves
//     too). Record the re-reads in the step's record: folded back as
//     Result.Fresh with ReadAt, they make the later requests carry the
//     same content without reading again. Repeat while Stale names reads
//     not in Fresh (each round only adds to Fresh, so this ends; one round
//     is the rule).
//  4. Record Output.Stats as the step's assembly, and what the provider
//     counted as Reported; Stats.Bytes over the reported tokens is the
//     calibration (BytesPerToken) of the run's later estimates.
//
// When the whole transcript fits, it is the request, so a provider's
// prompt cache holds from turn to turn. Under pressure, results are
// superseded, invalidated, cut newest first and collapsed, in steps that
// keep the request's prefix the same for several turns at a time.
package assemble
