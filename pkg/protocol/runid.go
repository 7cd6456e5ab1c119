package protocol

import (
	"crypto/sha256"
	"encoding/hex"
)

// RunIDFor returns the run id a submission with the idempotency key id
// (its Nats-Msg-Id) gets. A key that is a valid subject token of at most 64
// bytes is the run id itself; any other key is hashed to one. So the same
// key always names the same run, and a submitter can know its run id before
// anyone answers.
func RunIDFor(id string) string {
	if len(id) <= 64 && ValidToken(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "r" + hex.EncodeToString(sum[:10])
}
