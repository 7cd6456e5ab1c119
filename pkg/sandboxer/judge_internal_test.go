package sandboxer

import (
	"fmt"
	"strings"
	"testing"
)

// TestPoliciesBounded keeps a sandboxer's compiled policies within their
// count and their bytes: a policy larger than the bytes is used (each use
// compiles it) and not kept, and a policy past the count starts the cache
// again, its compiled forms let go with it.
func TestPoliciesBounded(t *testing.T) {
	rule := func(pattern string) []byte {
		return []byte(`{"layers":[{"name":"t","rules":[{"act":"read","effect":"deny","pattern":"` + pattern + `"}]}]}`)
	}
	var c policies

	big, err := c.decode(rule(strings.Repeat("a", policyCacheBytes)))
	if err != nil || big == nil {
		t.Fatalf("decode(a policy over the bytes) = %v, %v; want it decoded", big, err)
	}
	if _, ok := compiled.Load(big); ok {
		t.Error("a policy over the bytes stays compiled")
	}
	if pol, err := compilePolicy(big); err != nil || pol == nil {
		t.Errorf("compilePolicy(a policy over the bytes) = %v, %v; want it compiled at its use", pol, err)
	}
	if n, b := c.cache.Len(); n != 0 || b != 0 {
		t.Errorf("a policy over the bytes was kept: %d policies, %d bytes", n, b)
	}

	first, err := c.decode(rule("p0"))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.decode(rule("p0")); again != first {
		t.Error("one policy decoded twice gave two values")
	}
	if _, ok := compiled.Load(first); !ok {
		t.Fatal("a kept policy is not compiled")
	}
	for i := 1; i < policyCacheSize; i++ {
		if _, err := c.decode(rule(fmt.Sprintf("p%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.cache.Len(); n != policyCacheSize {
		t.Fatalf("the cache holds %d policies, want %d", n, policyCacheSize)
	}
	last, err := c.decode(rule("past the count"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := c.cache.Len(); n != 1 {
		t.Errorf("after a policy past the count the cache holds %d, want 1", n)
	}
	if _, ok := compiled.Load(first); ok {
		t.Error("a policy the cache let go stays compiled")
	}
	if _, ok := compiled.Load(last); !ok {
		t.Error("the policy kept last is not compiled")
	}
}
