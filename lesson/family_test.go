package lesson

import (
	"strings"
	"testing"
)

const familyBase = `
categories:
  - {id: a-one, group: g, name: A, description: d, rule: r, cues: [aaa]}
  - {id: b-two, group: g, name: B, description: d, rule: r, cues: [bbb]}
  - {id: c-three, group: g, name: C, description: d, rule: r, cues: [ccc]}
  - {id: d-four, group: g, name: D, description: d, rule: r, cues: [ddd]}
`

// Neighbour sets that share a category join into one family, named by
// its smallest id; a set naming an unknown category, or too few, is
// refused; a curator's file adds sets to the embedded ones.
func TestNeighbourSetsMakeFamilies(t *testing.T) {
	tax, err := ParseTaxonomy([]byte("neighbours:\n  - [d-four, b-two]\n  - [c-three, d-four]\n" + familyBase))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"a-one": "a-one", "b-two": "b-two", "c-three": "b-two", "d-four": "b-two", Unclear: Unclear} {
		if got := tax.Family(id); got != want {
			t.Errorf("family of %s = %s, want %s", id, got, want)
		}
	}
	for yaml, want := range map[string]string{
		"neighbours:\n  - [a-one, nope]\n" + familyBase: `"nope" is not a category`,
		"neighbours:\n  - [a-one]\n" + familyBase:       "needs 2 to",
		"neighbours:\n  - [a-one, e-five]\n" + familyBase + "  - {id: e-five, group: g, name: E, description: d, rule: r, cues: [eee], protected: true}\n": "joins protected and unprotected",
	} {
		if _, err := ParseTaxonomy([]byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", yaml, err, want)
		}
	}
	plain, err := ParseTaxonomy([]byte(familyBase))
	if err != nil {
		t.Fatal(err)
	}
	ext, err := plain.Extend([]byte("neighbours:\n  - [a-one, c-three]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ext.Family("c-three") != "a-one" || plain.Family("c-three") != "c-three" {
		t.Fatalf("extended family %q, base %q", ext.Family("c-three"), plain.Family("c-three"))
	}
	if ext.Version == plain.Version {
		t.Fatal("a curator's neighbour sets must change the taxonomy's version")
	}
}
