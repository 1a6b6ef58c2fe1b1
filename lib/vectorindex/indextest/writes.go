package indextest

import (
	"context"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// The contract of writes: upserts, deletes and bad input.

func testUpsertReplaces(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(4, 4))
	others := randomVectors(rng, 10, defaultSpec.Dimension, "o")
	a, b := randomUnit(rng, defaultSpec.Dimension), randomUnit(rng, defaultSpec.Dimension)
	upsert(t, idx, others...)
	upsert(t, idx, vectorindex.Vector{ID: "x", Embedding: a, Metadata: map[string]string{"k1": "v1", "k2": "v2"}, Document: "old text"})
	upsert(t, idx, vectorindex.Vector{ID: "x", Embedding: b, Metadata: map[string]string{"k1": "new"}})
	wantCount(t, idx, len(others)+1)

	got := query(t, idx, vectorindex.Query{Embedding: b, Limit: 1})
	if len(got) != 1 || got[0].ID != "x" || math.Abs(got[0].Similarity-1) > tolerance {
		t.Fatalf("query by the new vector: %v, want x at similarity 1", got)
	}
	if want := map[string]string{"k1": "new"}; !maps.Equal(got[0].Metadata, want) {
		t.Errorf("metadata after replace = %v, want %v (keys not given again are gone)", got[0].Metadata, want)
	}
	if got[0].Document != "" {
		t.Errorf("document after replace = %q, want empty", got[0].Document)
	}
	// The old vector is gone: x now sits at cos(a, b) from a.
	got = query(t, idx, vectorindex.Query{Embedding: a, Limit: len(others) + 1, MinSimilarity: -1})
	for _, hit := range got {
		if hit.ID == "x" && math.Abs(hit.Similarity-embedding.Cosine(a, b)) > tolerance {
			t.Errorf("x against the old vector: similarity %v, want %v", hit.Similarity, embedding.Cosine(a, b))
		}
	}
}

func testUpsertIdempotent(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(5, 5))
	vs := randomVectors(rng, 15, defaultSpec.Dimension, "i")
	upsert(t, idx, vs...)
	q := vectorindex.Query{Embedding: randomUnit(rng, defaultSpec.Dimension), Limit: 15, MinSimilarity: -1}
	before := query(t, idx, q)
	upsert(t, idx, vs...)
	wantCount(t, idx, len(vs))
	wantHits(t, query(t, idx, q), before)
}

func testDuplicateInBatch(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	first, last := axis(defaultSpec.Dimension, 0), axis(defaultSpec.Dimension, 1)
	upsert(t, idx,
		vectorindex.Vector{ID: "d", Embedding: first, Metadata: map[string]string{"v": "first"}},
		vectorindex.Vector{ID: "e", Embedding: axis(defaultSpec.Dimension, 2)},
		vectorindex.Vector{ID: "d", Embedding: last, Metadata: map[string]string{"v": "last"}},
	)
	wantCount(t, idx, 2)
	got := query(t, idx, vectorindex.Query{Embedding: last, Limit: 1})
	if len(got) != 1 || got[0].ID != "d" || got[0].Metadata["v"] != "last" {
		t.Fatalf("got %v, want d with the last vector and metadata", got)
	}
}

func testDelete(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(6, 6))
	vs := randomVectors(rng, 12, defaultSpec.Dimension, "del")
	upsert(t, idx, vs...)
	wantCount(t, idx, 12)
	if err := idx.Delete(context.Background(), []string{vs[0].ID, "never-stored", vs[5].ID, vs[0].ID}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	wantCount(t, idx, 10)
	if err := idx.Delete(context.Background(), []string{"never-stored"}); err != nil {
		t.Fatalf("delete a missing ID: %v", err)
	}
	if err := idx.Delete(context.Background(), nil); err != nil {
		t.Fatalf("delete nothing: %v", err)
	}
	wantCount(t, idx, 10)
	remaining := slices.Concat(vs[1:5], vs[6:])
	for _, v := range []vectorindex.Vector{vs[0], vs[5]} {
		q := vectorindex.Query{Embedding: v.Embedding, Limit: 12, MinSimilarity: -1}
		got := query(t, idx, q)
		if slices.Contains(hitIDs(got), v.ID) {
			t.Errorf("deleted %s still found", v.ID)
		}
		wantHits(t, got, bruteForce(remaining, q))
	}
	upsert(t, idx, vs[0])
	wantCount(t, idx, 11)
}

func testWrongDimension(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(7, 7))
	good := randomVectors(rng, 3, defaultSpec.Dimension, "g")
	for _, dim := range []int{defaultSpec.Dimension - 1, defaultSpec.Dimension + 1, 0} {
		bad := vectorindex.Vector{ID: "bad", Embedding: randomUnit(rng, max(dim, 1))[:dim]}
		err := idx.Upsert(context.Background(), append(slices.Clone(good), bad))
		if !errors.Is(err, vectorindex.ErrDimension) {
			t.Errorf("upsert with a %d-long embedding: err = %v, want ErrDimension", dim, err)
		}
		_, err = idx.Query(context.Background(), vectorindex.Query{Embedding: bad.Embedding, Limit: 1})
		if !errors.Is(err, vectorindex.ErrDimension) {
			t.Errorf("query with a %d-long embedding: err = %v, want ErrDimension", dim, err)
		}
	}
	wantCount(t, idx, 0)
}

func testInvalidInput(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	dim := defaultSpec.Dimension
	ok := vectorindex.Vector{ID: "ok", Embedding: axis(dim, 0)}
	withNaN := axis(dim, 0)
	withNaN[3] = float32(math.NaN())
	withInf := axis(dim, 0)
	withInf[1] = float32(math.Inf(1))
	upserts := []struct {
		name string
		v    vectorindex.Vector
	}{
		{"empty ID", vectorindex.Vector{Embedding: axis(dim, 1)}},
		{"NaN component", vectorindex.Vector{ID: "n", Embedding: withNaN}},
		{"infinite component", vectorindex.Vector{ID: "i", Embedding: withInf}},
		{"zero vector", vectorindex.Vector{ID: "z", Embedding: make([]float32, dim)}},
		{"empty metadata key", vectorindex.Vector{ID: "k", Embedding: axis(dim, 1), Metadata: map[string]string{"": "v"}}},
		{"reserved chroma: key", vectorindex.Vector{ID: "k", Embedding: axis(dim, 1), Metadata: map[string]string{"chroma:x": "v"}}},
		{"operator-like key", vectorindex.Vector{ID: "k", Embedding: axis(dim, 1), Metadata: map[string]string{"$and": "v"}}},
		{"invalid UTF-8 ID", vectorindex.Vector{ID: "\xff", Embedding: axis(dim, 1)}},
	}
	for _, tt := range upserts {
		err := idx.Upsert(context.Background(), []vectorindex.Vector{ok, tt.v})
		if !errors.Is(err, vectorindex.ErrInvalid) {
			t.Errorf("upsert %s: err = %v, want ErrInvalid", tt.name, err)
		}
	}
	wantCount(t, idx, 0)
	if err := idx.Delete(context.Background(), []string{""}); !errors.Is(err, vectorindex.ErrInvalid) {
		t.Errorf("delete an empty ID: err = %v, want ErrInvalid", err)
	}
	queries := []struct {
		name string
		q    vectorindex.Query
	}{
		{"zero limit", vectorindex.Query{Embedding: axis(dim, 0)}},
		{"negative limit", vectorindex.Query{Embedding: axis(dim, 0), Limit: -1}},
		{"NaN minimum", vectorindex.Query{Embedding: axis(dim, 0), Limit: 1, MinSimilarity: math.NaN()}},
		{"zero query vector", vectorindex.Query{Embedding: make([]float32, dim), Limit: 1}},
		{"empty filter value", vectorindex.Query{Embedding: axis(dim, 0), Limit: 1, Where: map[string]string{"agent": ""}}},
		{"reserved filter key", vectorindex.Query{Embedding: axis(dim, 0), Limit: 1, Where: map[string]string{"$or": "x"}}},
	}
	for _, tt := range queries {
		if _, err := idx.Query(context.Background(), tt.q); !errors.Is(err, vectorindex.ErrInvalid) {
			t.Errorf("query with %s: err = %v, want ErrInvalid", tt.name, err)
		}
	}
}
