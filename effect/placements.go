package effect

import "sync"

// placementCache keeps each evaluated negative decision's cluster and
// lesson category between effects passes. The two strings are interned:
// a million decisions share some thousands of clusters and a few dozen
// categories, and a copy of both per decision was 76 MB of heap at a
// million stored.
type placementCache struct {
	mu     sync.Mutex
	byID   map[string][2]uint32
	strs   []string // strs[0] is ""
	number map[string]uint32
}

func (p *placementCache) get(id string) ([2]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.byID[id]
	if !ok {
		return [2]string{}, false
	}
	return [2]string{p.strs[v[0]], p.strs[v[1]]}, true
}

func (p *placementCache) put(id string, v [2]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID == nil {
		p.byID, p.strs, p.number = map[string][2]uint32{}, []string{""}, map[string]uint32{}
	}
	p.byID[id] = [2]uint32{p.intern(v[0]), p.intern(v[1])}
}

// intern returns s's number, adding it; p.mu is held.
func (p *placementCache) intern(s string) uint32 {
	if s == "" {
		return 0
	}
	if n, ok := p.number[s]; ok {
		return n
	}
	n := uint32(len(p.strs))
	p.strs = append(p.strs, s)
	p.number[s] = n
	return n
}

// reset forgets everything, so the next pass sees every re-clustering
// and correction.
func (p *placementCache) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID, p.strs, p.number = nil, nil, nil
}

// len is the number of decisions cached.
func (p *placementCache) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byID)
}
