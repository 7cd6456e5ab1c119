package coordinator

import (
	"testing"
	"time"
)

// TestRootOpensForgetThoseWhoseTimeIsUp: the opens whose answers are
// heard are forgotten once their time is up, when a later open comes a
// second or more after the last look, and not before.
func TestRootOpensForgetThoseWhoseTimeIsUp(t *testing.T) {
	ro := rootOpens{open: map[string]*rootOpen{}}
	ro.add("old", &rootOpen{until: time.Now().Add(-time.Minute)})
	ro.add("live", &rootOpen{until: time.Now().Add(time.Minute)})
	if _, ok := ro.open["old"]; !ok {
		t.Fatal("an open was forgotten by a look made less than a second after the last")
	}
	ro.swept = time.Now().Add(-2 * time.Second)
	ro.add("new", &rootOpen{until: time.Now().Add(time.Minute)})
	if _, ok := ro.open["old"]; ok {
		t.Error("an open whose time is up was kept")
	}
	for _, token := range []string{"live", "new"} {
		if _, ok := ro.open[token]; !ok {
			t.Errorf("the open %s, whose time is not up, was forgotten", token)
		}
	}
}
