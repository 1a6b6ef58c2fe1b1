package effect

import "sync"

// nameTable numbers strings: 0 is "", the others in the order first
// seen. A number never changes.
type nameTable struct {
	strs   []string
	number map[string]name
}

func newNameTable() nameTable {
	return nameTable{strs: []string{""}, number: map[string]name{}}
}

// of returns s's number, adding it.
func (t *nameTable) of(s string) name {
	if s == "" {
		return 0
	}
	if n, ok := t.number[s]; ok {
		return n
	}
	n := name(len(t.strs))
	t.strs = append(t.strs, s)
	t.number[s] = n
	return n
}

// placementCache keeps each evaluated negative decision's cluster and
// lesson category between effects passes. The two strings are numbered
// in a table of their own: a million decisions share some thousands of
// clusters and a few dozen categories, and a copy of both per decision
// was 76 MB of heap at a million stored.
type placementCache struct {
	mu    sync.Mutex
	byID  map[string][2]name
	names nameTable
}

func (p *placementCache) get(id string) ([2]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.byID[id]
	if !ok {
		return [2]string{}, false
	}
	return [2]string{p.names.strs[v[0]], p.names.strs[v[1]]}, true
}

func (p *placementCache) put(id string, v [2]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID == nil {
		p.byID, p.names = map[string][2]name{}, newNameTable()
	}
	p.byID[id] = [2]name{p.names.of(v[0]), p.names.of(v[1])}
}

// reset forgets everything, so the next pass sees every re-clustering
// and correction.
func (p *placementCache) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID, p.names = nil, nameTable{}
}
