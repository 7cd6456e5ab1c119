// Package protocol holds the types that cross process boundaries in harness:
// the contract a user submits, the step tasks coordinators hand to workers,
// the turns workers hand back, the operations coordinators send to
// sandboxers, the records of the durable trace, the live events and the
// result of a run.
//
// Every type here is plain data with a stable JSON form (golden files in
// testdata/ pin it). Decoding of anything a user writes is strict: unknown
// fields, a wrong schema version, missing required fields and oversize
// payloads are each a typed, coded [*Error] that names the field and says
// what to do. Errors that cross the wire keep their code, so
// errors.Is(err, ErrUnknownField) holds after a NATS round trip.
//
// The package imports nothing of ours and no NATS, Redis, Docker or
// provider SDK; every other package may import it.
package protocol
