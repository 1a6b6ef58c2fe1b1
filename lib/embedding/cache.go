package embedding

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
)

// Cache is an Embedder that remembers the vector of every text it
// embedded, by the SHA-256 of the text, and embeds only the texts it has
// not seen: rule texts and the guidance on main are few, change seldom
// and are compared often. It holds at most the number of vectors it was
// made with, in two generations: when the newer is full it becomes the
// older and the older is dropped, and a vector read from the older moves
// to the newer, so what is still used stays. It is safe for concurrent
// use. The vectors it returns are shared: callers must not change them.
type Cache struct {
	emb Embedder
	gen int // vectors per generation

	mu       sync.Mutex
	cur, old map[[sha256.Size]byte][]float32
}

var _ Embedder = (*Cache)(nil)

// NewCache returns a Cache of e's vectors holding at most size of them
// (at least 2).
func NewCache(e Embedder, size int) *Cache {
	return &Cache{emb: e, gen: max(1, size/2), cur: map[[sha256.Size]byte][]float32{}}
}

// Name is the cached embedder's name.
func (c *Cache) Name() string { return c.emb.Name() }

// Dimension is the cached embedder's dimension.
func (c *Cache) Dimension() int { return c.emb.Dimension() }

// Len returns how many vectors the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}

// Embed returns one vector per text, embedding in one call only the
// texts the cache does not hold.
func (c *Cache) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	keys := make([][sha256.Size]byte, len(texts))
	var missing []string
	var at []int
	c.mu.Lock()
	for i, t := range texts {
		keys[i] = sha256.Sum256([]byte(t))
		if v, ok := c.get(keys[i]); ok {
			out[i] = v
			continue
		}
		missing = append(missing, t)
		at = append(at, i)
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	vecs, err := c.emb.Embed(ctx, missing)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(missing) {
		return nil, fmt.Errorf("embedder %s returned %d vectors for %d texts", c.emb.Name(), len(vecs), len(missing))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, v := range vecs {
		out[at[j]] = v
		c.put(keys[at[j]], v)
	}
	return out, nil
}

// get returns the vector of a key, moving it to the newer generation.
// c.mu must be held.
func (c *Cache) get(k [sha256.Size]byte) ([]float32, bool) {
	if v, ok := c.cur[k]; ok {
		return v, true
	}
	v, ok := c.old[k]
	if ok {
		delete(c.old, k)
		c.put(k, v)
	}
	return v, ok
}

// put stores a vector in the newer generation, starting a new one when
// it is full. c.mu must be held.
func (c *Cache) put(k [sha256.Size]byte, v []float32) {
	if len(c.cur) >= c.gen {
		c.old, c.cur = c.cur, make(map[[sha256.Size]byte][]float32, c.gen)
	}
	c.cur[k] = v
}
