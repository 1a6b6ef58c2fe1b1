package console

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"google.golang.org/protobuf/proto"
)

// drawCache keeps drawn charts (inline SVG, SVG and PNG files) under a
// digest of everything they are drawn from, so the same figures over the
// same data are drawn once: drawing is most of an analytics page's cost
// and all of a PNG export's (docs/console.md, "Performance"). Keys are
// content digests, so an entry is never stale; new data makes new keys,
// and the cache starts again when it holds maxDrawCache bytes.
type drawCache struct {
	mu   sync.Mutex
	m    map[string][]byte
	size int
}

// maxDrawCache bounds the bytes a console keeps drawn: a few hundred
// charts (an inline SVG is about 15–75 kB, a PNG 15–50 kB).
const maxDrawCache = 16 << 20

func (d *drawCache) get(key string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.m[key]
	return b, ok
}

func (d *drawCache) put(key string, b []byte) {
	if len(b) > maxDrawCache/4 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || d.size+len(b) > maxDrawCache {
		d.m, d.size = map[string][]byte{}, 0
	}
	if old, ok := d.m[key]; ok {
		d.size -= len(old)
	}
	d.m[key] = b
	d.size += len(b)
}

// drawn returns what draw makes for key, drawing it on a miss; callers
// must not modify what it returns. A nil cache or an empty key draws.
func (d *drawCache) drawn(key string, draw func() ([]byte, error)) ([]byte, error) {
	if d == nil || key == "" {
		return draw()
	}
	if b, ok := d.get(key); ok {
		return b, nil
	}
	b, err := draw()
	if err == nil {
		d.put(key, b)
	}
	return b, err
}

// dataDigest identifies the data of a page: its filters and the responses
// its charts are drawn from (deterministic encodings, so equal responses
// give equal digests).
func dataDigest(filters string, msgs ...proto.Message) (string, error) {
	h := sha256.New()
	h.Write([]byte(filters))
	for _, m := range msgs {
		if m == nil || !m.ProtoReflect().IsValid() {
			h.Write([]byte{1})
			continue
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			return "", err
		}
		h.Write([]byte{0})
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
