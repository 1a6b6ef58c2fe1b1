package chromem

import (
	"encoding/binary"
	"maps"
	"slices"
)

// tuples interns metadata maps. Feedback metadata repeats: the same
// agent, reviewer, epic, category and cluster recur across thousands of
// decisions, so a row holds the number of its map in a shared table
// instead of a map of its own. Entries are counted and their numbers
// reused once no row holds them.
type tuples struct {
	byKey map[string]uint32
	maps  []map[string]string // by number; nil when free
	keys  []string
	refs  []int32
	free  []uint32
}

func newTuples() *tuples { return &tuples{byKey: map[string]uint32{}} }

// tupleKey is a canonical encoding of m: keys sorted, each key and value
// prefixed with its length.
func tupleKey(m map[string]string) string {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return string(b)
}

// acquire returns the number of m, adding it if new, and counts one more
// holder. The table keeps its own copy of m.
func (t *tuples) acquire(m map[string]string) uint32 {
	key := tupleKey(m)
	if n, ok := t.byKey[key]; ok {
		t.refs[n]++
		return n
	}
	var own map[string]string
	if len(m) > 0 {
		own = maps.Clone(m)
	}
	var n uint32
	if k := len(t.free); k > 0 {
		n, t.free = t.free[k-1], t.free[:k-1]
		t.maps[n], t.keys[n], t.refs[n] = own, key, 1
	} else {
		n = uint32(len(t.maps))
		t.maps, t.keys, t.refs = append(t.maps, own), append(t.keys, key), append(t.refs, 1)
	}
	t.byKey[key] = n
	return n
}

// release counts one holder of n fewer and frees it when none is left.
func (t *tuples) release(n uint32) {
	if t.refs[n]--; t.refs[n] > 0 {
		return
	}
	delete(t.byKey, t.keys[n])
	t.maps[n], t.keys[n] = nil, ""
	t.free = append(t.free, n)
}

// metadata returns a copy of tuple n, or nil when it is empty, so hits
// carry nil metadata the way the Chroma backend's do.
func (t *tuples) metadata(n uint32) map[string]string {
	if len(t.maps[n]) == 0 {
		return nil
	}
	return maps.Clone(t.maps[n])
}

// matching returns, by tuple number, whether the tuple has every key of
// where with exactly its value.
func (t *tuples) matching(where map[string]string) []bool {
	out := make([]bool, len(t.maps))
	for n, m := range t.maps {
		if t.refs[n] <= 0 {
			continue
		}
		out[n] = true
		for k, v := range where {
			if got, ok := m[k]; !ok || got != v {
				out[n] = false
				break
			}
		}
	}
	return out
}
