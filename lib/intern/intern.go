// Package intern numbers strings, so that tables of many rows hold a
// small number where they would hold a string (the effect tracker's
// facts, the impact ledger's rows).
package intern

// Table numbers strings: 0 is "", the others in the order first seen. A
// number never changes. The zero Table is ready to use. A Table is not
// safe for concurrent use.
type Table struct {
	strs   []string
	number map[string]uint32
}

// Of returns s's number, numbering it when it is new.
func (t *Table) Of(s string) uint32 {
	if s == "" {
		return 0
	}
	if n, ok := t.number[s]; ok {
		return n
	}
	if t.number == nil {
		t.strs, t.number = []string{""}, map[string]uint32{}
	}
	n := uint32(len(t.strs))
	t.strs = append(t.strs, s)
	t.number[s] = n
	return n
}

// Lookup returns s's number without numbering it: ok is false when s
// was never numbered ("" always is, as 0).
func (t *Table) Lookup(s string) (n uint32, ok bool) {
	if s == "" {
		return 0, true
	}
	n, ok = t.number[s]
	return n, ok
}

// Strings is the strings numbered so far, indexed by number. Numbering
// more never changes it (its capacity is its length), so it may be read
// without the lock that guards the Table.
func (t *Table) Strings() []string {
	if t.strs == nil {
		return []string{""}
	}
	return t.strs[:len(t.strs):len(t.strs)]
}

// Len is how many numbers are taken, "" included.
func (t *Table) Len() int { return max(len(t.strs), 1) }
