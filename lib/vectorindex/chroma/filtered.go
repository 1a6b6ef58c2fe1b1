package chroma

import (
	"context"

	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/internal/topk"
)

// overFetch is how many nearest neighbours of the whole collection a
// filtered query reads for each hit it needs (filtered).
const overFetch = 4

// maxOverFetched bounds what filtered reads unfiltered; a larger query
// goes to the server's filtered search at once.
const maxOverFetched = 4096

// filtered answers a query with a metadata filter as the server's
// filtered search would (exactly so where Chroma's searches are exact:
// past its brute-force buffer both are approximate), mostly without it:
// Chroma's filtered search was 110–190 ms a query against 13–17 ms
// unfiltered, on a
// collection of 50k vectors where the filter kept one agent's fifth
// (docs/decisions/0003, "Filtered queries"). It reads the overFetch·n
// nearest vectors of the whole collection and keeps those matching the
// filter. They are the answer when the collection had no more vectors,
// or when the last vector read is already below q.MinSimilarity (any
// match left out is below it too, and topk.Select cuts there, so fewer
// than n hits is the whole answer), or when n matches are strictly more
// similar than the last vector read (any match left out is at most as
// similar as that one). Otherwise it asks the server's filtered search.
func filtered(ctx context.Context, n int, q vectorindex.Query, all, server topk.SearchFunc) ([]vectorindex.Hit, error) {
	if n > maxOverFetched/overFetch {
		return server(ctx, n) // a query for most of the collection
	}
	m := n * overFetch
	raw, err := all(ctx, m)
	if err != nil {
		return nil, err
	}
	topk.Sort(raw)
	var matched []vectorindex.Hit
	for _, h := range raw {
		if matches(h.Metadata, q.Where) {
			matched = append(matched, h)
		}
	}
	if len(raw) < m || raw[len(raw)-1].Similarity < q.MinSimilarity {
		return matched[:min(n, len(matched))], nil
	}
	floor := raw[len(raw)-1].Similarity
	exact := 0
	for exact < len(matched) && matched[exact].Similarity > floor {
		exact++
	}
	if exact >= n {
		return matched[:n], nil
	}
	return server(ctx, n)
}

// matches reports whether md holds every pair of where.
func matches(md, where map[string]string) bool {
	for k, v := range where {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}
