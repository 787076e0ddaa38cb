package secrets

import (
	"container/list"
	"sync"
	"time"
)

// cache holds values by name for ttl, at most max of them. Entries are
// kept in the order they were fetched, so the oldest, the first to expire,
// is at the front: expired entries are dropped from there at every put,
// and a full cache evicts the oldest.
type cache struct {
	ttl time.Duration
	max int

	mu     sync.Mutex
	byName map[string]*list.Element
	order  *list.List // of *entry, oldest fetch first
}

type entry struct {
	name    string
	value   string
	fetched time.Time
}

func newCache(ttl time.Duration, max int) *cache {
	return &cache{ttl: ttl, max: max, byName: map[string]*list.Element{}, order: list.New()}
}

func (c *cache) fresh(e *entry, now time.Time) bool { return now.Sub(e.fetched) < c.ttl }

func (c *cache) get(name string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byName[name]
	if !ok {
		return "", false
	}
	e := el.Value.(*entry)
	if !c.fresh(e, now) {
		c.removeLocked(el)
		return "", false
	}
	return e.value, true
}

func (c *cache) put(name, value string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byName[name]; ok {
		c.removeLocked(el)
	}
	for el := c.order.Front(); el != nil && (c.order.Len() >= c.max || !c.fresh(el.Value.(*entry), now)); el = c.order.Front() {
		c.removeLocked(el)
	}
	c.byName[name] = c.order.PushBack(&entry{name: name, value: value, fetched: now})
}

func (c *cache) removeLocked(el *list.Element) {
	delete(c.byName, el.Value.(*entry).name)
	c.order.Remove(el)
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
