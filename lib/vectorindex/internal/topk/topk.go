// Package topk turns a backend's nearest-neighbour search, which may order
// and cut equal similarities arbitrarily, into the deterministic result the
// vectorindex.Index contract promises: similarity descending, ties by ID
// ascending, even when a tie straddles the limit.
package topk

import (
	"cmp"
	"context"
	"slices"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// SearchFunc returns up to n hits most similar to the query. Among equal
// similarities it may return them in any order, and when a tie straddles
// n it may return any of them. Fewer than n hits means there are no more.
type SearchFunc func(ctx context.Context, n int) ([]vectorindex.Hit, error)

// Select returns up to limit hits with similarity ≥ minSimilarity, by
// similarity descending and ID ascending. It asks search for one hit more
// than limit and, while the hit at the limit ties with the last one
// fetched, asks again for twice as many, never for more than available
// (the number of stored vectors; pass a large number when unknown).
func Select(ctx context.Context, limit, available int, minSimilarity float64, search SearchFunc) ([]vectorindex.Hit, error) {
	if limit <= 0 || available <= 0 {
		return nil, nil
	}
	n := min(limit+1, available)
	for {
		hits, err := search(ctx, n)
		if err != nil {
			return nil, err
		}
		Sort(hits)
		if len(hits) < n || n >= available || len(hits) <= limit {
			return cut(hits, limit, minSimilarity), nil
		}
		boundary := hits[limit-1].Similarity
		if boundary < minSimilarity || hits[len(hits)-1].Similarity != boundary {
			return cut(hits, limit, minSimilarity), nil
		}
		// Every fetched hit from the limit on ties with the boundary: the
		// backend may have left out tied hits whose IDs sort first.
		n = min(2*n, available)
	}
}

// Sort orders hits by similarity descending, then ID ascending.
func Sort(hits []vectorindex.Hit) {
	slices.SortFunc(hits, func(a, b vectorindex.Hit) int {
		if c := cmp.Compare(b.Similarity, a.Similarity); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

func cut(hits []vectorindex.Hit, limit int, minSimilarity float64) []vectorindex.Hit {
	if len(hits) > limit {
		hits = hits[:limit]
	}
	for i, h := range hits {
		if h.Similarity < minSimilarity {
			hits = hits[:i]
			break
		}
	}
	if len(hits) == 0 {
		return nil
	}
	return slices.Clip(hits)
}
