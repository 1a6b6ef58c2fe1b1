package chromem

import "slices"

// postings lists, for each metadata pair number, the rows holding the
// pair in ascending order, so that a query filtered by a pair scans only
// those rows rather than every row with a mask (scan.go, "listed"). A
// store whose rows spread over many agents answers an agent's query at
// the cost of that agent's rows. Four bytes per pair a row holds.
type postings [][]int32

// add lists row under pair n.
func (p *postings) add(n uint32, row int32) {
	for int(n) >= len(*p) {
		*p = append(*p, nil)
	}
	l := (*p)[n]
	if len(l) == 0 || l[len(l)-1] < row {
		(*p)[n] = append(l, row) // a new row is the largest
		return
	}
	i, found := slices.BinarySearch(l, row)
	if !found {
		(*p)[n] = slices.Insert(l, i, row)
	}
}

// remove unlists row from pair n; a list left empty is freed.
func (p postings) remove(n uint32, row int32) {
	if int(n) >= len(p) {
		return
	}
	l := p[n]
	if i, found := slices.BinarySearch(l, row); found {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		l = nil
	}
	p[n] = l
}

// of returns the rows holding pair n.
func (p postings) of(n uint32) []int32 {
	if int(n) >= len(p) {
		return nil
	}
	return p[n]
}

// relist moves row from the pairs of old to those of new, both sorted,
// touching only the pairs that differ.
func (p *postings) relist(row int32, old, new []uint32) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || (i < len(old) && old[i] < new[j]):
			p.remove(old[i], row)
			i++
		case i == len(old) || new[j] < old[i]:
			p.add(new[j], row)
			j++
		default:
			i++
			j++
		}
	}
}
