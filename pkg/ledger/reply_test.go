package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

func TestParseMalformed(t *testing.T) {
	x := Reservation{Tree: "t", Agent: "a", Key: "k"}
	good := "Gr0" + strings.Repeat("\x00", answerLen)
	if _, err := parseGrant(good, x); err != nil {
		t.Fatalf("parseGrant(zero answer) = %v", err)
	}
	for _, rep := range []string{"", "?", "G", "Gq0" + strings.Repeat("\x00", answerLen), good[:len(good)-1], "R,tree,tokens,1,2", "R,tree,tokens,x,2,3", "R,tree,wall,0,0,1", "S0short"} {
		_, gerr := parseGrant(rep, x)
		_, serr := parseSettlement(rep, "t", "k")
		for _, err := range []error{gerr, serr} {
			var r *Refusal
			if errors.As(err, &r) {
				continue // parseSettlement may see a refusal that parseGrant sees too
			}
			if !errors.Is(err, protocol.ErrInternal) && !errors.Is(err, ErrTreeUnknown) {
				t.Errorf("parse(%q) = %v, want an internal error", rep, err)
			}
		}
	}
	if _, err := parseTotals("t", map[string]string{"c": "short"}); !errors.Is(err, protocol.ErrInternal) {
		t.Errorf("parseTotals(bad c) = %v, want internal", err)
	}
	h := map[string]string{"c": pack(0, 0, 0, 0, 0, 0, 0, 0, 0), "s": pack(0, 0, 0, 0, 0, 0, 0, 0), "a:x": "bad"}
	if _, err := parseTotals("t", h); !errors.Is(err, protocol.ErrInternal) {
		t.Errorf("parseTotals(bad agent) = %v, want internal", err)
	}
}

func TestParseRefusal(t *testing.T) {
	err := parseFailure("R,tree,wall,0,0,3600000000,1700000000000000", "t", "a")
	var r *Refusal
	if !errors.As(err, &r) || r.Dimension != DimWall || !r.Deadline.Equal(time.UnixMicro(1_700_000_000_000_000)) || r.Limit != 3_600_000_000 {
		t.Errorf("parseFailure(wall) = %#v", err)
	}
}

func TestPackRoundTrip(t *testing.T) {
	in := []int64{0, 1, -1, MaxAmount, -MaxAmount, 1 << 62}
	out := make([]int64, len(in))
	if !ints(pack(in...), out) {
		t.Fatal("ints rejected pack's output")
	}
	for i := range in {
		if in[i] != out[i] {
			t.Errorf("round trip of %d = %d", in[i], out[i])
		}
	}
	if ints("1234567", make([]int64, 1)) {
		t.Error("ints accepted 7 bytes for one int")
	}
}
