package chromem

import "slices"

// pairs interns metadata (key, value) pairs. Feedback metadata repeats
// pair by pair (the same agent, reviewer, epic, category and cluster
// recur across thousands of decisions) but rarely as a whole, so a row
// holds the sorted numbers of its pairs, four bytes each, and the strings
// live once in this table. Pairs are counted and their numbers reused once
// no row holds them.
type pairs struct {
	byPair map[pair]uint32
	table  []pair // by number; zero when free
	refs   []int32
	free   []uint32
}

type pair struct{ key, value string }

func newPairs() *pairs { return &pairs{byPair: map[pair]uint32{}} }

// acquire returns the sorted numbers of m's pairs, adding the new ones,
// and counts one more holder of each; nil for no metadata.
func (t *pairs) acquire(m map[string]string) []uint32 {
	if len(m) == 0 {
		return nil
	}
	out := make([]uint32, 0, len(m))
	for k, v := range m {
		p := pair{k, v}
		n, ok := t.byPair[p]
		switch {
		case ok:
			t.refs[n]++
		case len(t.free) > 0:
			n, t.free = t.free[len(t.free)-1], t.free[:len(t.free)-1]
			t.table[n], t.refs[n] = p, 1
		default:
			n = uint32(len(t.table))
			t.table, t.refs = append(t.table, p), append(t.refs, 1)
		}
		t.byPair[p] = n
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// release counts one holder fewer of each of ns, freeing those no row
// holds any more.
func (t *pairs) release(ns []uint32) {
	for _, n := range ns {
		if t.refs[n]--; t.refs[n] > 0 {
			continue
		}
		delete(t.byPair, t.table[n])
		t.table[n] = pair{}
		t.free = append(t.free, n)
	}
}

// metadata returns the map of pairs ns, or nil when there are none, so
// hits carry nil metadata the way the Chroma backend's do.
func (t *pairs) metadata(ns []uint32) map[string]string {
	if len(ns) == 0 {
		return nil
	}
	m := make(map[string]string, len(ns))
	for _, n := range ns {
		m[t.table[n].key] = t.table[n].value
	}
	return m
}

// filter is a query's Where as pair numbers, sorted: a row matches when
// it holds all of them. ok is false when some pair is held by no row, so
// nothing matches.
func (t *pairs) filter(where map[string]string) (want []uint32, ok bool) {
	for k, v := range where {
		n, held := t.byPair[pair{k, v}]
		if !held {
			return nil, false
		}
		want = append(want, n)
	}
	slices.Sort(want)
	return want, true
}

// holds reports whether the sorted pair numbers have includes every one of
// the sorted numbers want.
func holds(have, want []uint32) bool {
	i := 0
	for _, w := range want {
		for i < len(have) && have[i] < w {
			i++
		}
		if i == len(have) || have[i] != w {
			return false
		}
		i++
	}
	return true
}
