package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Encoding of the scripts' arguments and decoding of their replies and of
// the tree hash (see scripts.go for the layout).

// Sizes of the packed fields, in bytes.
const (
	usageLen      = 4 * 8
	countersLen   = 8 * 8
	agentLen      = 9 * 8
	ceilingLen    = 9 * 8
	answerLen     = usageLen + countersLen + agentLen + ceilingLen
	grantLen      = 3 + answerLen
	settlementLen = 2 + answerLen
)

// pack encodes vs as big-endian int64s.
func pack(vs ...int64) string {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return string(b)
}

func packUsage(u Usage) string { return pack(u.InputTokens, u.OutputTokens, u.CostMicros, u.Steps) }

// ints decodes s, whose length must be 8*len(dst), into dst.
func ints(s string, dst []int64) bool {
	if len(s) != 8*len(dst) {
		return false
	}
	for i := range dst {
		b := s[8*i : 8*i+8]
		dst[i] = int64(uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
			uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7]))
	}
	return true
}

func usageOf(v []int64) Usage { return Usage{v[0], v[1], v[2], v[3]} }

func ceilingOf(v []int64) Ceiling {
	return Ceiling{
		Limits: Limits{InputTokens: v[0], OutputTokens: v[1], Tokens: v[2], CostMicros: v[3], Steps: v[4]},
		Agents: int(v[5]), Depth: int(v[6]), Start: time.UnixMicro(v[7]), Wall: time.Duration(v[8]) * time.Microsecond,
	}
}

func badReply(rep string) error {
	return fmt.Errorf("ledger: %w", protocol.Errorf(protocol.CodeInternal, "malformed script reply %q", rep))
}

// parseFailure turns a reply that is not a grant or a settlement into its
// error.
func parseFailure(rep, tree, agent string) error {
	switch rep {
	case "T":
		return ErrTreeUnknown
	case "A":
		return ErrAgentUnknown
	case "K":
		return ErrReservationUnknown
	case "X":
		return ErrReleased
	}
	f := strings.Split(rep, ",")
	if f[0] != "R" || len(f) < 6 {
		return badReply(rep)
	}
	ref := &Refusal{Tree: tree, Agent: agent, Scope: Scope(f[1]), Dimension: Dimension(f[2])}
	var err error
	for i, p := range []*int64{&ref.Asked, &ref.Remaining, &ref.Limit} {
		if *p, err = strconv.ParseInt(f[3+i], 10, 64); err != nil {
			return badReply(rep)
		}
	}
	if ref.Dimension == DimWall {
		if len(f) != 7 {
			return badReply(rep)
		}
		us, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return badReply(rep)
		}
		ref.Deadline = time.UnixMicro(us)
	}
	return ref
}

// answer decodes an answer: the amount, then the balance.
func answer(s string) (Usage, Balance, bool) {
	var v [answerLen / 8]int64
	if !ints(s, v[:]) {
		return Usage{}, Balance{}, false
	}
	// amount 0..3, counters 4..11, agent 12..20 (depth first), ceiling 21..29
	b := Balance{Spent: usageOf(v[4:8]), Reserved: usageOf(v[8:12]), AgentSpent: usageOf(v[13:17]), AgentReserved: usageOf(v[17:21])}
	b.Remaining = remaining(ceilingOf(v[21:30]).Limits, b.Spent, b.Reserved)
	return usageOf(v[0:4]), b, true
}

var states = map[byte]State{'r': StateReserved, 's': StateSettled, 'x': StateReleased}

// parseGrant decodes G<state><replayed><answer> or a failure.
func parseGrant(rep string, x Reservation) (Grant, error) {
	if len(rep) == 0 || rep[0] != 'G' {
		return Grant{}, parseFailure(rep, x.Tree, x.Agent)
	}
	if len(rep) != grantLen {
		return Grant{}, badReply(rep)
	}
	st, ok := states[rep[1]]
	amount, b, ok2 := answer(rep[3:])
	if !ok || !ok2 {
		return Grant{}, badReply(rep)
	}
	return Grant{Key: x.Key, Reserved: amount, Balance: b, State: st, Replayed: rep[2] == '1'}, nil
}

// parseSettlement decodes S<replayed><answer> or a failure.
func parseSettlement(rep, tree, key string) (Settlement, error) {
	if len(rep) == 0 || rep[0] != 'S' {
		return Settlement{}, parseFailure(rep, tree, "")
	}
	amount, b, ok := answer(rep[2:])
	if !ok {
		return Settlement{}, badReply(rep)
	}
	return Settlement{Key: key, Charged: amount, Balance: b, Replayed: rep[1] == '1'}, nil
}

// parseTotals decodes the tree hash.
func parseTotals(tree string, h map[string]string) (Totals, error) {
	bad := func(field string) (Totals, error) {
		return Totals{}, fmt.Errorf("ledger totals: %w", protocol.Errorf(protocol.CodeInternal, "tree %q field %q is malformed: %q", tree, field, h[field]))
	}
	var c [ceilingLen / 8]int64
	if !ints(h["c"], c[:]) {
		return bad("c")
	}
	var s [countersLen / 8]int64
	if !ints(h["s"], s[:]) {
		return bad("s")
	}
	t := Totals{Tree: tree, Ceiling: ceilingOf(c[:]), Spent: usageOf(s[0:4]), Reserved: usageOf(s[4:8]), Agents: make(map[string]AgentTotals)}
	for f, v := range h {
		agent, ok := strings.CutPrefix(f, "a:")
		if !ok {
			continue
		}
		var a [agentLen / 8]int64
		if !ints(v, a[:]) {
			return bad(f)
		}
		t.Agents[agent] = AgentTotals{Depth: int(a[0]), Spent: usageOf(a[1:5]), Reserved: usageOf(a[5:9])}
	}
	t.Remaining = remaining(t.Ceiling.Limits, t.Spent, t.Reserved)
	return t, nil
}

// parsePlace decodes H,<taken> or Q,<ahead>,<taken>, or a failure.
func parsePlace(rep string) (Place, error) {
	if rep == "T" {
		return Place{}, ErrTreeUnknown
	}
	f := strings.Split(rep, ",")
	var n [2]int
	if (f[0] != "H" || len(f) != 2) && (f[0] != "Q" || len(f) != 3) {
		return Place{}, badReply(rep)
	}
	for i, v := range f[1:] {
		x, err := strconv.Atoi(v)
		if err != nil || x < 0 {
			return Place{}, badReply(rep)
		}
		n[i] = x
	}
	if f[0] == "H" {
		return Place{Held: true, Taken: n[0]}, nil
	}
	return Place{Ahead: n[0], Taken: n[1]}, nil
}

// parsePlaces decodes the tree's places for Totals, leaving out those
// that lapsed by the server's time now: the holders sorted, the queued in
// their order, nil when none.
func parsePlaces(tree string, now time.Time, held map[string]string, queue []string, turns map[string]string) (places, queued []string, err error) {
	at := now.UnixMicro()
	bad := func(key, agent string) error {
		return fmt.Errorf("ledger totals: %w", protocol.Errorf(protocol.CodeInternal, "tree %q %s of %q is malformed", tree, key, agent))
	}
	for a, v := range held {
		var u [1]int64
		if !ints(v, u[:]) {
			return nil, nil, bad("place", a)
		}
		if u[0] == 0 || u[0] > at {
			places = append(places, a)
		}
	}
	slices.Sort(places)
	for _, a := range queue {
		var u [2]int64
		if !ints(turns[a], u[:]) {
			return nil, nil, bad("queued turn", a)
		}
		if u[0] > at {
			queued = append(queued, a)
		}
	}
	return places, queued, nil
}
