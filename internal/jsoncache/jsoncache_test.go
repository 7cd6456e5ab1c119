package jsoncache

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestBounds holds the cache to its count and its bytes: a document over
// the bytes is used and not kept, and one that would pass either bound
// starts the cache again, letting go of every value it held.
func TestBounds(t *testing.T) {
	var dropped []string
	c := New(3, 100, func(v string) { dropped = append(dropped, v) })
	doc := func(n int, fill string) []byte { return []byte(`"` + strings.Repeat(fill, n-2) + `"`) }
	check := func(when string, values, bytes int) {
		t.Helper()
		if v, b := c.Len(); v != values || b != bytes {
			t.Errorf("%s: the cache holds %d values of %d bytes, want %d of %d", when, v, b, values, bytes)
		}
	}

	if v, kept := c.Keep(doc(101, "x"), "huge"); kept || v != "huge" {
		t.Errorf("Keep(over the bytes) = %q, %v; want it back, not kept", v, kept)
	}
	check("after a document over the bytes", 0, 0)

	a, b, d := doc(40, "a"), doc(40, "b"), doc(30, "d")
	if v, kept := c.Keep(a, "A"); !kept || v != "A" {
		t.Errorf("Keep(a) = %q, %v; want A, kept", v, kept)
	}
	if v, kept := c.Keep(a, "A2"); kept || v != "A" {
		t.Errorf("Keep(a) again = %q, %v; want the value kept first, A", v, kept)
	}
	c.Keep(b, "B")
	check("after two of 40 bytes", 2, 80)
	c.Keep(d, "D") // 110 bytes: past the bound
	check("after a third past the bytes", 1, 30)
	slices.Sort(dropped)
	if !slices.Equal(dropped, []string{"A", "B"}) {
		t.Errorf("dropped %q, want A and B", dropped)
	}
	if _, ok := c.Get(a); ok {
		t.Error("a is still kept after the cache started again")
	}
	if v, ok := c.Get(d); !ok || v != "D" {
		t.Errorf("Get(d) = %q, %v; want D", v, ok)
	}

	dropped = nil
	c.Keep(doc(5, "1"), "1")
	c.Keep(doc(5, "2"), "2")
	check("after three small", 3, 40)
	c.Keep(doc(5, "3"), "3") // a fourth: past the count
	check("after a fourth past the count", 1, 5)
	if len(dropped) != 3 {
		t.Errorf("dropped %q, want the three held", dropped)
	}
}

// TestZeroKeepsNothing: the zero Cache is usable and keeps nothing.
func TestZeroKeepsNothing(t *testing.T) {
	var c Cache[int]
	if v, kept := c.Keep([]byte(`{}`), 7); kept || v != 7 {
		t.Errorf("Keep on the zero cache = %d, %v; want 7, not kept", v, kept)
	}
	if _, ok := c.Get([]byte(`{}`)); ok {
		t.Error("the zero cache kept a value")
	}
}

// TestConcurrentKeep: of callers racing to keep one document, all end up
// with one value.
func TestConcurrentKeep(t *testing.T) {
	c := New[*int](8, 1<<10, nil)
	raw := []byte(`{"policy":1}`)
	got := make([]*int, 16)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			v := new(int)
			got[i], _ = c.Keep(raw, v)
		})
	}
	wg.Wait()
	kept, _ := c.Get(raw)
	for i, v := range got {
		if v != kept {
			t.Fatalf("caller %d has its own value, not the one kept", i)
		}
	}
}
