package effect

import (
	"fmt"
	"testing"
)

func TestPlacementsAreInternedAndForgottenByReset(t *testing.T) {
	var p placementCache
	if _, ok := p.get("d-0"); ok {
		t.Fatal("an empty cache found d-0")
	}
	for i := range 3000 {
		p.put(fmt.Sprintf("d-%d", i), [2]string{fmt.Sprintf("c-%d", i%3), "tests-missing"})
	}
	p.put("d-x", [2]string{"", ""})
	for _, c := range []struct {
		id   string
		want [2]string
	}{{"d-0", [2]string{"c-0", "tests-missing"}}, {"d-2999", [2]string{"c-2", "tests-missing"}}, {"d-x", [2]string{}}} {
		if got, ok := p.get(c.id); !ok || got != c.want {
			t.Fatalf("%s = %q, %v; want %q", c.id, got, ok, c.want)
		}
	}
	if n := p.names.Len(); n != 5 {
		t.Fatalf("%d strings kept for 3 clusters and 1 category, want 5 with the empty one", n)
	}
	if len(p.byID) != 3001 {
		t.Fatalf("%d decisions cached, want 3001", len(p.byID))
	}
	p.reset()
	if _, ok := p.get("d-0"); ok || len(p.byID) != 0 {
		t.Fatal("reset kept d-0")
	}
	p.put("d-0", [2]string{"c-9", "naming"})
	if got, _ := p.get("d-0"); got != [2]string{"c-9", "naming"} {
		t.Fatalf("after reset d-0 = %q", got)
	}
}
