package prompts

import "sync"

// maxCachedBase is the largest base prompt sent with a request whose
// assembled prompt is cached: the cache key holds the base prompt, so
// huge ones would let a few requests pin a lot of memory.
const maxCachedBase = 64 << 10

// cacheKey identifies an assembled prompt within one index. Requests for
// files in the same directory share an entry.
type cacheKey struct {
	agent, stage, dir string
	base              string
	hasBase           bool
}

// cacheEntry is an assembled prompt or the error assembling it gave:
// both depend only on the index and the key.
type cacheEntry struct {
	prompt *Prompt
	err    error
}

// cache holds the prompts assembled from one index; a new index starts
// with an empty cache, which is how changes invalidate it. Hits take a
// read lock only: when full, an arbitrary entry is evicted (Go randomises
// map iteration), which needs no bookkeeping on the read path.
type cache struct {
	mu  sync.RWMutex
	max int
	m   map[cacheKey]cacheEntry
}

func newCache(max int) *cache {
	return &cache{max: max, m: make(map[cacheKey]cacheEntry)}
}

func (c *cache) get(k cacheKey) (cacheEntry, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	return e, ok
}

func (c *cache) put(k cacheKey, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = e
}

func (c *cache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
