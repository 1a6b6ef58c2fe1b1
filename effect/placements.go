package effect

import (
	"sync"

	"github.com/precept-dev/precept/lib/intern"
)

// placementCache keeps each evaluated negative decision's cluster and
// lesson category between effects passes. The two strings are numbered
// in a table of their own: a million decisions share some thousands of
// clusters and a few dozen categories, and a copy of both per decision
// was 76 MB of heap at a million stored.
type placementCache struct {
	mu    sync.Mutex
	byID  map[string][2]name
	names intern.Table
}

func (p *placementCache) get(id string) ([2]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.byID[id]
	if !ok {
		return [2]string{}, false
	}
	strs := p.names.Strings()
	return [2]string{strs[v[0]], strs[v[1]]}, true
}

func (p *placementCache) put(id string, v [2]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID == nil {
		p.byID = map[string][2]name{}
	}
	p.byID[id] = [2]name{name(p.names.Of(v[0])), name(p.names.Of(v[1]))}
}

// reset forgets everything, so the next pass sees every re-clustering
// and correction.
func (p *placementCache) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID, p.names = nil, intern.Table{}
}
