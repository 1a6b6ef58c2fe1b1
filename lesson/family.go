package lesson

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Families: neighbouring categories are those whose lessons reviewers
// often mean alike — commented-out code flagged as noise, as dead code or
// as a debugging leftover. The taxonomy declares them as neighbour sets;
// sets that share a category join into one family. Clustering groups an
// agent's lessons by family, so a first classification error between
// neighbours can be repaired by similarity, while unrelated categories
// stay walled apart (docs/lessons.md, "Clustering").

// alternativeWeight is the weight of a neighbouring alternative scored
// as high as the lesson's category; its category weighs 1 (before the
// weights are made a unit vector).
const alternativeWeight = 0.6

// maxNeighbourSet bounds a neighbour set, so one family cannot swallow
// the taxonomy and make a re-clustering group unbounded.
const maxNeighbourSet = 8

// joinFamilies checks the neighbour sets and names each category's
// family, the smallest id among the categories its sets join it to.
func (t *Taxonomy) joinFamilies() []error {
	var errs []error
	parent := make(map[string]string, len(t.Categories))
	find := func(id string) string {
		for parent[id] != id {
			parent[id] = parent[parent[id]]
			id = parent[id]
		}
		return id
	}
	for _, c := range t.Categories {
		parent[c.ID] = c.ID
	}
	for i, set := range t.Neighbours {
		where := fmt.Sprintf("taxonomy: neighbour set %d", i+1)
		if len(set) < 2 || len(set) > maxNeighbourSet {
			errs = append(errs, fmt.Errorf("%s: names %d categories, needs 2 to %d", where, len(set), maxNeighbourSet))
			continue
		}
		for _, id := range set {
			if _, ok := t.byID[id]; !ok {
				errs = append(errs, fmt.Errorf("%s: %q is not a category", where, id))
			}
		}
		if len(errs) > 0 {
			continue
		}
		for _, id := range set[1:] {
			a, b := find(set[0]), find(id)
			if a != b {
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	t.family = make(map[string]string, len(t.Categories))
	size := map[string]int{}
	protected := map[string]map[bool]bool{}
	for _, c := range t.Categories {
		f := find(c.ID)
		t.family[c.ID] = f
		size[f]++
		if protected[f] == nil {
			protected[f] = map[bool]bool{}
		}
		protected[f][c.Protected] = true
	}
	for f, kinds := range protected {
		// A cluster of a protected category drafts a constraint under the
		// safety floor; one family must not let it pass for a guideline.
		if len(kinds) > 1 {
			errs = append(errs, fmt.Errorf("taxonomy: the family of %q joins protected and unprotected categories", f))
		}
	}
	for f, n := range size {
		if n > 2*maxNeighbourSet {
			errs = append(errs, fmt.Errorf("taxonomy: the neighbour sets join %d categories into the family of %q, at most %d", n, f, 2*maxNeighbourSet))
		}
	}
	return errs
}

// Family names the family of category id: the smallest id of its
// neighbours' family, id itself when it has no neighbours or is not in
// the taxonomy (Unclear, a category a later taxonomy dropped).
func (t *Taxonomy) Family(id string) string {
	if f, ok := t.family[id]; ok {
		return f
	}
	return id
}

// Weights are a lesson's categories with weights, for clustering: its
// category and the alternatives the classifier scored in the same family,
// in proportion to their scores, as a unit vector. A lesson a curator or
// a model placed, or whose category has no neighbours, is its category
// alone. Weights are rounded so that every replica computes the same.
func (t *Taxonomy) Weights(l Lesson) map[string]float64 {
	switch {
	case l.Category == "":
		return nil
	case !l.Known():
		// An unclear lesson clustered for its correction diff is compared
		// with others like it by their embeddings alone.
		return map[string]float64{l.Category: 1}
	}
	family := t.Family(l.Category)
	w := map[string]float64{l.Category: 1}
	var top float64
	for _, m := range l.Alternatives {
		if m.Category == l.Category {
			top = m.Score
		}
	}
	if strings.HasPrefix(l.By, "deterministic") && top > 0 {
		for _, m := range l.Alternatives {
			if m.Category != l.Category && m.Score > 0 && t.Family(m.Category) == family {
				w[m.Category] = alternativeWeight * m.Score / top
			}
		}
	}
	if len(w) == 1 {
		return w
	}
	// Summed in key order, so every replica rounds alike; a weight that
	// rounds to nothing is dropped.
	keys := slices.Sorted(maps.Keys(w))
	var norm float64
	for _, k := range keys {
		norm += w[k] * w[k]
	}
	norm = math.Sqrt(norm)
	for _, k := range keys {
		if w[k] = math.Round(w[k]/norm*1000) / 1000; w[k] == 0 {
			delete(w, k)
		}
	}
	return w
}
