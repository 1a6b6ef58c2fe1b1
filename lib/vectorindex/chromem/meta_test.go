package chromem

import (
	"maps"
	"testing"
)

// Pairs are shared between rows, counted, and freed with the last row
// that holds them; a freed number is reused, and a filter on a pair no
// row holds any more matches nothing.
func TestMetadataPairsAreSharedCountedAndFreed(t *testing.T) {
	p := newPairs()
	a := p.acquire(map[string]string{"agent": "coder", "reviewer": "ana"})
	b := p.acquire(map[string]string{"agent": "coder", "reviewer": "bo"})
	if len(p.byPair) != 3 {
		t.Fatalf("%d pairs interned, want 3", len(p.byPair))
	}
	if !maps.Equal(p.metadata(a), map[string]string{"agent": "coder", "reviewer": "ana"}) {
		t.Errorf("metadata(a) = %v", p.metadata(a))
	}
	want, ok := p.filter(map[string]string{"agent": "coder"})
	if !ok || !holds(a, want) || !holds(b, want) {
		t.Errorf("agent=coder: ok %v, holds %v %v", ok, holds(a, want), holds(b, want))
	}
	want, _ = p.filter(map[string]string{"agent": "coder", "reviewer": "bo"})
	if holds(a, want) || !holds(b, want) {
		t.Errorf("agent=coder,reviewer=bo matches a: %v, b: %v", holds(a, want), holds(b, want))
	}
	p.release(a)
	if _, ok := p.filter(map[string]string{"reviewer": "ana"}); ok {
		t.Error("a pair no row holds still filters")
	}
	if _, ok := p.filter(map[string]string{"agent": "coder"}); !ok {
		t.Error("a pair b still holds was freed")
	}
	c := p.acquire(map[string]string{"epic": "E-1"})
	if len(p.table) != 3 || p.metadata(c)["epic"] != "E-1" {
		t.Errorf("freed number not reused: table %d, %v", len(p.table), p.metadata(c))
	}
	if p.acquire(nil) != nil || p.metadata(nil) != nil {
		t.Error("empty metadata is not nil")
	}
}
