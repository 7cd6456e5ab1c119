// Package jsoncache keeps values made from JSON documents by the
// documents' own bytes, within a bound on their number and on their bytes.
//
// The roles use it for what every message of a run carries byte for byte,
// such as the run's policy: decoded and compiled once, looked up by its JSON
// at every later message. A document is as large as the message that
// carries it, so a bound on the count alone would not bound the memory.
package jsoncache

import "sync"

// Cache keeps values by the JSON they were made from. It holds at most
// Count values of Bytes of JSON in all; a document that would take it past
// either starts it again empty, and one larger than Bytes is not kept. The
// zero Cache keeps nothing; make one with New. It is safe for concurrent
// use.
type Cache[V any] struct {
	count, bytes int
	dropped      func(V)

	mu    sync.Mutex
	byRaw map[string]V
	held  int // the bytes of the JSON kept
}

// New returns a cache of at most count values and bytes of JSON. dropped,
// if not nil, is called with each value the cache lets go when it starts
// again, while it holds its lock: it must not call the cache.
func New[V any](count, bytes int, dropped func(V)) *Cache[V] {
	return &Cache[V]{count: count, bytes: bytes, dropped: dropped}
}

// Get returns the value kept for raw, if any.
func (c *Cache[V]) Get(raw []byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.byRaw[string(raw)]
	return v, ok
}

// Keep keeps v as raw's value and returns it, with true; or, when a value
// is kept for raw already (made meanwhile by another caller), returns that
// one, with false; or, when raw is larger than the cache's bytes, keeps
// nothing and returns v with false.
func (c *Cache[V]) Keep(raw []byte, v V) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.byRaw[string(raw)]; ok {
		return kept, false
	}
	if len(raw) > c.bytes {
		return v, false
	}
	if len(c.byRaw) >= c.count || c.held+len(raw) > c.bytes {
		if c.dropped != nil {
			for _, old := range c.byRaw {
				c.dropped(old)
			}
		}
		clear(c.byRaw)
		c.held = 0
	}
	if c.byRaw == nil {
		c.byRaw = make(map[string]V)
	}
	c.byRaw[string(raw)] = v
	c.held += len(raw)
	return v, true
}

// Len returns how many values the cache keeps and the bytes of their JSON.
func (c *Cache[V]) Len() (values, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byRaw), c.held
}
