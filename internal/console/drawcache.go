package console

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"

	"google.golang.org/protobuf/proto"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
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
	figs map[string]figure
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
	d.roomLocked(len(b))
	if old, ok := d.m[key]; ok {
		d.size -= len(old)
	}
	d.m[key] = b
	d.size += len(b)
}

// roomLocked empties the cache when n more bytes would not fit.
func (d *drawCache) roomLocked(n int) {
	if d.m == nil || d.size+n > maxDrawCache {
		d.m, d.figs, d.size = map[string][]byte{}, map[string]figure{}, 0
	}
}

// figureSize estimates what a kept page figure holds.
func figureSize(f figure) int {
	return 256 + len(f.SVG) + len(f.body) + len(f.Title) + len(f.Desc) + len(f.Export)
}

// getFigure returns a page figure kept under key: drawn, its data table
// written, without its plot or rows.
func (d *drawCache) getFigure(key string) (figure, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.figs[key]
	return f, ok
}

func (d *drawCache) putFigure(key string, f figure) {
	n := figureSize(f)
	if n > maxDrawCache/4 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roomLocked(n)
	if old, ok := d.figs[key]; ok {
		d.size -= figureSize(old)
	}
	d.figs[key] = f
	d.size += n
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

// dataDigest identifies what a page's charts are drawn from: its
// filters and the GetAnalytics responses (deterministic encodings, so
// equal responses give equal digests). A response's position is left
// out: it moves with every decision stored, of any agent and any day,
// and no chart draws it.
func dataDigest(filters string, resps ...*preceptv1.GetAnalyticsResponse) (string, error) {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(filters)))
	h.Write(n[:])
	h.Write([]byte(filters))
	buf := digestBuffers.Get().(*[]byte)
	defer digestBuffers.Put(buf)
	for _, r := range resps {
		if r == nil {
			h.Write([]byte{0})
			continue
		}
		pos := r.Position
		r.Position = 0
		b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend((*buf)[:0], r)
		r.Position = pos
		if err != nil {
			return "", err
		}
		*buf = b
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write([]byte{1})
		h.Write(n[:])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// digestBuffers are the encodings' buffers, reused: a split response is
// a few hundred kB.
var digestBuffers = sync.Pool{New: func() any { return new([]byte) }}
