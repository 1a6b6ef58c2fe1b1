// Package indextest holds the contract tests every vectorindex.Index
// backend must pass. A backend's test calls Run with a function that opens
// its index; results are checked against a brute-force cosine computed here.
package indextest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/precept-dev/precept/embedding"
	"github.com/precept-dev/precept/vectorindex"
)

// Opener opens the index stored under key for spec and reports whether it
// started empty (reset). Opening a key again after the index was closed
// must reach the same storage; different keys must not share storage. Keys
// are short and made of [a-z0-9-]. The Opener fails t on error; Run closes
// what it opens.
type Opener func(t *testing.T, key string, spec vectorindex.Spec) (idx vectorindex.Index, reset bool)

// tolerance is how far a backend's similarity may stray from the float64
// reference: backends compute in float32.
const tolerance = 1e-4

// defaultSpec is what most subtests index with.
var defaultSpec = vectorindex.Spec{Embedder: "indextest-v1", Dimension: 32}

// Run runs the contract tests against the backend open opens.
func Run(t *testing.T, open Opener) {
	h := &harness{open: open}
	tests := []struct {
		name string
		run  func(*testing.T, *harness)
	}{
		{"NewStorageStartsEmptyWithReset", testNewStorage},
		{"QueryMatchesBruteForceCosine", testBruteForce},
		{"MinSimilarityDropsHitsBelowThreshold", testMinSimilarity},
		{"LimitCapsHits", testLimit},
		{"WhereKeepsOnlyVectorsMatchingEveryPair", testWhere},
		{"UpsertReplacesVectorMetadataAndDocument", testUpsertReplaces},
		{"UpsertIsIdempotent", testUpsertIdempotent},
		{"LastDuplicateInOneUpsertWins", testDuplicateInBatch},
		{"DeleteRemovesVectorsAndIgnoresMissingIDs", testDelete},
		{"WrongDimensionIsErrDimensionAndStoresNothing", testWrongDimension},
		{"InvalidInputIsErrInvalidAndStoresNothing", testInvalidInput},
		{"QueryOnEmptyIndexReturnsNoHits", testEmptyQuery},
		{"TiesAreOrderedByID", testTies},
		{"IndexKeepsCopiesOfWhatItIsGivenAndReturns", testCopies},
		{"ReopenKeepsVectors", testReopen},
		{"SpecChangeResetsToEmpty", testSpecChange},
		{"UnicodeMetadataAndDocumentsRoundTrip", testUnicode},
		{"ThousandVectorBatch", testThousand},
		{"ClosedIndexRefusesCalls", testClosed},
		{"CancelledContextIsAnError", testCancelled},
		{"ConcurrentUpsertsAndQueries", testConcurrent},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := *h
			h.key = fmt.Sprintf("c%02d", i)
			tt.run(t, &h)
		})
	}
}

type harness struct {
	open Opener
	key  string
}

// index opens the subtest's storage and closes it when the test ends.
func (h *harness) index(t *testing.T, spec vectorindex.Spec) (vectorindex.Index, bool) {
	t.Helper()
	idx, reset := h.open(t, h.key, spec)
	t.Cleanup(func() {
		if err := idx.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if got := idx.Spec(); got != spec {
		t.Fatalf("Spec() = %v, want %v", got, spec)
	}
	return idx, reset
}

// fresh opens the subtest's storage and requires it to start empty.
func (h *harness) fresh(t *testing.T, spec vectorindex.Spec) vectorindex.Index {
	t.Helper()
	idx, reset := h.index(t, spec)
	if !reset {
		t.Fatalf("new storage: reset = false, want true")
	}
	wantCount(t, idx, 0)
	return idx
}

func testNewStorage(t *testing.T, h *harness) {
	h.fresh(t, defaultSpec)
}

func testBruteForce(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(1, 1))
	vs := randomVectors(rng, 60, defaultSpec.Dimension, "v")
	for i := range vs {
		vs[i].Metadata = map[string]string{"n": fmt.Sprint(i), "parity": []string{"even", "odd"}[i%2]}
		vs[i].Document = fmt.Sprintf("feedback number %d", i)
		if i%7 == 0 {
			// Cosine, not dot product: scale must not matter.
			scale(vs[i].Embedding, 2.5)
		}
	}
	upsert(t, idx, vs...)
	wantCount(t, idx, len(vs))
	for i := range 5 {
		q := vectorindex.Query{Embedding: randomUnit(rng, defaultSpec.Dimension), Limit: 10, MinSimilarity: -1}
		if i == 4 {
			scale(q.Embedding, 0.3)
		}
		got := query(t, idx, q)
		wantHits(t, got, bruteForce(vs, q))
		stored := byID(vs)
		for _, hit := range got {
			v := stored[hit.ID]
			if !maps.Equal(hit.Metadata, v.Metadata) || hit.Document != v.Document {
				t.Errorf("hit %s: metadata %v, document %q; want %v, %q", hit.ID, hit.Metadata, hit.Document, v.Metadata, v.Document)
			}
		}
	}
}

func testMinSimilarity(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	q := axis(defaultSpec.Dimension, 0)
	// Vectors at known cosines to q, around precept's default 0.8.
	cosines := map[string]float64{"c95": 0.95, "c85": 0.85, "c81": 0.81, "c79": 0.79, "c50": 0.5, "c00": 0, "cm60": -0.6}
	var vs []vectorindex.Vector
	for id, c := range cosines {
		vs = append(vs, vectorindex.Vector{ID: id, Embedding: atCosine(defaultSpec.Dimension, c)})
	}
	upsert(t, idx, vs...)
	tests := []struct {
		min  float64
		want []string
	}{
		{0.8, []string{"c95", "c85", "c81"}},
		{0.9, []string{"c95"}},
		{0.99, nil},
		{-0.1, []string{"c95", "c85", "c81", "c79", "c50", "c00"}},
		{-1, []string{"c95", "c85", "c81", "c79", "c50", "c00", "cm60"}},
	}
	for _, tt := range tests {
		got := query(t, idx, vectorindex.Query{Embedding: q, Limit: 10, MinSimilarity: tt.min})
		if !slices.Equal(hitIDs(got), tt.want) {
			t.Errorf("MinSimilarity %v: got %v, want %v", tt.min, hitIDs(got), tt.want)
		}
		for _, hit := range got {
			if d := math.Abs(hit.Similarity - cosines[hit.ID]); d > tolerance {
				t.Errorf("MinSimilarity %v: %s similarity %v, want %v", tt.min, hit.ID, hit.Similarity, cosines[hit.ID])
			}
		}
	}
}

func testLimit(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(2, 2))
	vs := randomVectors(rng, 20, defaultSpec.Dimension, "l")
	upsert(t, idx, vs...)
	for _, limit := range []int{1, 5, 19, 20, 21, 1000} {
		q := vectorindex.Query{Embedding: randomUnit(rng, defaultSpec.Dimension), Limit: limit, MinSimilarity: -1}
		got := query(t, idx, q)
		if want := min(limit, len(vs)); len(got) != want {
			t.Fatalf("Limit %d: %d hits, want %d", limit, len(got), want)
		}
		wantHits(t, got, bruteForce(vs, q))
	}
}

func testWhere(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(3, 3))
	vs := randomVectors(rng, 40, defaultSpec.Dimension, "w")
	for i := range vs {
		vs[i].Metadata = map[string]string{"agent": []string{"coder", "reviewer"}[i%2], "epic": []string{"E-1", "E-2", "E-3"}[i%3]}
	}
	upsert(t, idx, vs...)
	filters := []struct {
		where map[string]string
		none  bool
	}{
		{where: map[string]string{"agent": "coder"}},
		{where: map[string]string{"agent": "reviewer", "epic": "E-2"}},
		{where: map[string]string{"epic": "E-3"}},
		{where: map[string]string{}},
		{where: map[string]string{"agent": "planner"}, none: true},
		{where: map[string]string{"agent": "coder", "epic": "E-9"}, none: true},
		{where: map[string]string{"missing": "x"}, none: true},
	}
	for _, f := range filters {
		q := vectorindex.Query{Embedding: randomUnit(rng, defaultSpec.Dimension), Limit: 8, MinSimilarity: -1, Where: f.where}
		got := query(t, idx, q)
		want := bruteForce(vs, q)
		if f.none != (len(want) == 0) {
			t.Fatalf("bad fixture for %v", f.where)
		}
		wantHits(t, got, want)
		for _, hit := range got {
			for k, v := range f.where {
				if hit.Metadata[k] != v {
					t.Errorf("Where %v: hit %s has %s=%q", f.where, hit.ID, k, hit.Metadata[k])
				}
			}
		}
	}
}

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

func testEmptyQuery(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	for _, where := range []map[string]string{nil, {"agent": "coder"}} {
		got := query(t, idx, vectorindex.Query{Embedding: axis(defaultSpec.Dimension, 0), Limit: 5, MinSimilarity: -1, Where: where})
		if len(got) != 0 {
			t.Errorf("Where %v: got %v, want no hits", where, got)
		}
	}
	// Emptied by deletes is empty too.
	upsert(t, idx, vectorindex.Vector{ID: "a", Embedding: axis(defaultSpec.Dimension, 0)})
	if err := idx.Delete(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got := query(t, idx, vectorindex.Query{Embedding: axis(defaultSpec.Dimension, 0), Limit: 5}); len(got) != 0 {
		t.Errorf("after deleting everything: got %v, want no hits", got)
	}
}

func testTies(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(8, 8))
	same := randomUnit(rng, defaultSpec.Dimension)
	var vs []vectorindex.Vector
	for _, id := range []string{"tie-f", "tie-c", "tie-a", "tie-e", "tie-b", "tie-d"} {
		vs = append(vs, vectorindex.Vector{ID: id, Embedding: slices.Clone(same)})
	}
	vs = append(vs, randomVectors(rng, 10, defaultSpec.Dimension, "other")...)
	upsert(t, idx, vs...)
	for _, limit := range []int{1, 3, 5, 6} {
		got := query(t, idx, vectorindex.Query{Embedding: same, Limit: limit})
		want := []string{"tie-a", "tie-b", "tie-c", "tie-d", "tie-e", "tie-f"}[:limit]
		if !slices.Equal(hitIDs(got), want) {
			t.Errorf("Limit %d: got %v, want %v", limit, hitIDs(got), want)
		}
	}
	got := query(t, idx, vectorindex.Query{Embedding: same, Limit: 8, MinSimilarity: -1})
	if ids := hitIDs(got); len(ids) != 8 || !slices.Equal(ids[:6], []string{"tie-a", "tie-b", "tie-c", "tie-d", "tie-e", "tie-f"}) {
		t.Errorf("Limit 8: got %v, want the six ties in ID order first", ids)
	}
}

func testCopies(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	v := vectorindex.Vector{ID: "c", Embedding: axis(defaultSpec.Dimension, 0), Metadata: map[string]string{"k": "v"}, Document: "d"}
	upsert(t, idx, v)
	// The caller reuses its buffers.
	v.Embedding[0], v.Embedding[1] = 0, 1
	v.Metadata["k"] = "changed"
	got := query(t, idx, vectorindex.Query{Embedding: axis(defaultSpec.Dimension, 0), Limit: 1})
	if len(got) != 1 || math.Abs(got[0].Similarity-1) > tolerance || got[0].Metadata["k"] != "v" {
		t.Fatalf("after the caller changed its vector: %v, want c at similarity 1 with k=v", got)
	}
	got[0].Metadata["k"] = "mutated by caller"
	again := query(t, idx, vectorindex.Query{Embedding: axis(defaultSpec.Dimension, 0), Limit: 1})
	if again[0].Metadata["k"] != "v" {
		t.Errorf("changing a returned hit changed the index: k=%q", again[0].Metadata["k"])
	}
}

func testReopen(t *testing.T, h *harness) {
	rng := rand.New(rand.NewPCG(9, 9))
	vs := randomVectors(rng, 30, defaultSpec.Dimension, "r")
	for i := range vs {
		vs[i].Metadata = map[string]string{"i": fmt.Sprint(i)}
		vs[i].Document = fmt.Sprint("doc ", i)
	}
	q := vectorindex.Query{Embedding: randomUnit(rng, defaultSpec.Dimension), Limit: 30, MinSimilarity: -1}

	idx, reset := h.open(t, h.key, defaultSpec)
	if !reset {
		t.Fatal("new storage: reset = false")
	}
	upsert(t, idx, vs...)
	if err := idx.Delete(context.Background(), []string{vs[0].ID, vs[1].ID, vs[2].ID}); err != nil {
		t.Fatal(err)
	}
	vs[3].Embedding = randomUnit(rng, defaultSpec.Dimension)
	vs[3].Metadata = map[string]string{"replaced": "yes"}
	upsert(t, idx, vs[3])
	before := query(t, idx, q)
	if err := idx.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	idx, reset = h.index(t, defaultSpec)
	if reset {
		t.Fatal("reopen with the same spec: reset = true, want false")
	}
	wantCount(t, idx, 27)
	after := query(t, idx, q)
	wantHits(t, after, before)
	wantHits(t, after, bruteForce(vs[3:], q))
	for i := range after {
		if !maps.Equal(after[i].Metadata, before[i].Metadata) || after[i].Document != before[i].Document {
			t.Errorf("hit %s changed across reopen: %v %q, was %v %q", after[i].ID, after[i].Metadata, after[i].Document, before[i].Metadata, before[i].Document)
		}
	}
}

func testSpecChange(t *testing.T, h *harness) {
	rng := rand.New(rand.NewPCG(10, 10))
	idx, _ := h.open(t, h.key, defaultSpec)
	upsert(t, idx, randomVectors(rng, 5, defaultSpec.Dimension, "s")...)
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	specs := []vectorindex.Spec{
		{Embedder: "indextest-v2", Dimension: defaultSpec.Dimension},
		{Embedder: "indextest-v2", Dimension: 48},
	}
	for _, spec := range specs {
		idx, reset := h.open(t, h.key, spec)
		if !reset {
			t.Errorf("reopen as %v after %v: reset = false, want true", spec, defaultSpec)
		}
		wantCount(t, idx, 0)
		upsert(t, idx, randomVectors(rng, 2, spec.Dimension, "n")...)
		wantCount(t, idx, 2)
		if err := idx.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func testUnicode(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	md := map[string]string{
		"агент":     "ревьюер",
		"エピック":      "認証 🎉",
		"combining": "e\u0301te\u0301",
		"rtl":       "مراجعة الكود",
		"quote":     `"quoted" \ back\slash`,
	}
	doc := "Kein «Logging» von Passwörtern — 日本語のテキスト 🚫🔑\nzweite Zeile\ttab"
	upsert(t, idx,
		vectorindex.Vector{ID: "ユニコード-1", Embedding: axis(defaultSpec.Dimension, 0), Metadata: md, Document: doc},
		vectorindex.Vector{ID: "plain", Embedding: axis(defaultSpec.Dimension, 1), Metadata: map[string]string{"агент": "кодер"}},
	)
	got := query(t, idx, vectorindex.Query{Embedding: axis(defaultSpec.Dimension, 0), Limit: 5, MinSimilarity: -1, Where: map[string]string{"агент": "ревьюер", "エピック": "認証 🎉"}})
	if len(got) != 1 || got[0].ID != "ユニコード-1" {
		t.Fatalf("filter on unicode metadata: got %v, want ユニコード-1 only", hitIDs(got))
	}
	if !maps.Equal(got[0].Metadata, md) || got[0].Document != doc {
		t.Errorf("round trip: metadata %q, document %q; want %q, %q", got[0].Metadata, got[0].Document, md, doc)
	}
}

func testThousand(t *testing.T, h *harness) {
	spec := vectorindex.Spec{Embedder: "indextest-v1", Dimension: 384}
	idx := h.fresh(t, spec)
	rng := rand.New(rand.NewPCG(11, 11))
	vs := randomVectors(rng, 1000, spec.Dimension, "k")
	for i := range vs {
		vs[i].Metadata = map[string]string{"agent": fmt.Sprint("agent-", i%5)}
	}
	upsert(t, idx, vs...)
	wantCount(t, idx, 1000)
	stored := byID(vs)
	for i := 0; i < len(vs); i += 97 {
		got := query(t, idx, vectorindex.Query{Embedding: vs[i].Embedding, Limit: 5, MinSimilarity: -1})
		if len(got) != 5 || got[0].ID != vs[i].ID || math.Abs(got[0].Similarity-1) > tolerance {
			t.Fatalf("query by %s's own vector: %v, want it first at similarity 1", vs[i].ID, got)
		}
		// Every hit carries its true cosine, whatever search the backend uses.
		for _, hit := range got {
			if want := embedding.Cosine(vs[i].Embedding, stored[hit.ID].Embedding); math.Abs(hit.Similarity-want) > tolerance {
				t.Errorf("%s: similarity %v, want %v", hit.ID, hit.Similarity, want)
			}
		}
	}
}

func testClosed(t *testing.T, h *harness) {
	idx, _ := h.open(t, h.key, defaultSpec)
	upsert(t, idx, vectorindex.Vector{ID: "a", Embedding: axis(defaultSpec.Dimension, 0)})
	if err := idx.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := idx.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	ctx := context.Background()
	if err := idx.Upsert(ctx, []vectorindex.Vector{{ID: "b", Embedding: axis(defaultSpec.Dimension, 1)}}); !errors.Is(err, vectorindex.ErrClosed) {
		t.Errorf("upsert after close: %v, want ErrClosed", err)
	}
	if _, err := idx.Query(ctx, vectorindex.Query{Embedding: axis(defaultSpec.Dimension, 0), Limit: 1}); !errors.Is(err, vectorindex.ErrClosed) {
		t.Errorf("query after close: %v, want ErrClosed", err)
	}
	if err := idx.Delete(ctx, []string{"a"}); !errors.Is(err, vectorindex.ErrClosed) {
		t.Errorf("delete after close: %v, want ErrClosed", err)
	}
	if _, err := idx.Count(ctx); !errors.Is(err, vectorindex.ErrClosed) {
		t.Errorf("count after close: %v, want ErrClosed", err)
	}
}

func testCancelled(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := vectorindex.Vector{ID: "a", Embedding: axis(defaultSpec.Dimension, 0)}
	if err := idx.Upsert(ctx, []vectorindex.Vector{v}); !errors.Is(err, context.Canceled) {
		t.Errorf("upsert: %v, want context.Canceled", err)
	}
	if _, err := idx.Query(ctx, vectorindex.Query{Embedding: v.Embedding, Limit: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("query: %v, want context.Canceled", err)
	}
	if err := idx.Delete(ctx, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("delete: %v, want context.Canceled", err)
	}
	wantCount(t, idx, 0)
}

func testConcurrent(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	const writers, perWriter = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers*perWriter)
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 12))
			for i := range perWriter {
				v := vectorindex.Vector{ID: fmt.Sprintf("w%d-%02d", w, i), Embedding: randomUnit(rng, defaultSpec.Dimension), Metadata: map[string]string{"w": fmt.Sprint(w)}}
				if err := idx.Upsert(context.Background(), []vectorindex.Vector{v}); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 13))
			for range perWriter {
				q := vectorindex.Query{Embedding: randomUnit(rng, defaultSpec.Dimension), Limit: 5, MinSimilarity: -1, Where: map[string]string{"w": fmt.Sprint(w)}}
				hits, err := idx.Query(context.Background(), q)
				if err != nil {
					errs <- err
				}
				for i := 1; i < len(hits); i++ {
					if hits[i].Similarity > hits[i-1].Similarity {
						errs <- fmt.Errorf("hits out of order: %v", hits)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantCount(t, idx, writers*perWriter)
}

// bruteForce is the reference answer: cosine in float64 over every vector
// passing the filter, similarity descending, ties by ID.
func bruteForce(vs []vectorindex.Vector, q vectorindex.Query) []vectorindex.Hit {
	var hits []vectorindex.Hit
outer:
	for _, v := range vs {
		for k, want := range q.Where {
			if v.Metadata[k] != want {
				continue outer
			}
		}
		s := embedding.Cosine(q.Embedding, v.Embedding)
		if s >= q.MinSimilarity {
			hits = append(hits, vectorindex.Hit{ID: v.ID, Similarity: s, Metadata: v.Metadata, Document: v.Document})
		}
	}
	slices.SortFunc(hits, func(a, b vectorindex.Hit) int {
		if a.Similarity != b.Similarity {
			if a.Similarity > b.Similarity {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	if len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	return hits
}

// wantHits compares got to want rank by rank. Where two wanted hits are
// closer than the tolerance the backend may order them either way, so a
// rank matches when the hit there has want's similarity and, for clearly
// separated ranks, want's ID.
func wantHits(t *testing.T, got, want []vectorindex.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d hits %v, want %d %v", len(got), hitIDs(got), len(want), hitIDs(want))
	}
	seen := map[string]bool{}
	for i := range got {
		if seen[got[i].ID] {
			t.Fatalf("hit %s returned twice: %v", got[i].ID, hitIDs(got))
		}
		seen[got[i].ID] = true
		if math.Abs(got[i].Similarity-want[i].Similarity) > tolerance {
			t.Fatalf("rank %d: %s at %.6f, want %s at %.6f", i, got[i].ID, got[i].Similarity, want[i].ID, want[i].Similarity)
		}
		if i > 0 && got[i].Similarity > got[i-1].Similarity {
			t.Fatalf("rank %d: similarity rises (%v after %v)", i, got[i].Similarity, got[i-1].Similarity)
		}
		separated := (i == 0 || want[i-1].Similarity-want[i].Similarity > tolerance) &&
			(i == len(want)-1 || want[i].Similarity-want[i+1].Similarity > tolerance)
		if separated && got[i].ID != want[i].ID {
			t.Fatalf("rank %d: %s, want %s", i, got[i].ID, want[i].ID)
		}
	}
}

func upsert(t *testing.T, idx vectorindex.Index, vs ...vectorindex.Vector) {
	t.Helper()
	if err := idx.Upsert(context.Background(), vs); err != nil {
		t.Fatalf("upsert %d vectors: %v", len(vs), err)
	}
}

func query(t *testing.T, idx vectorindex.Index, q vectorindex.Query) []vectorindex.Hit {
	t.Helper()
	hits, err := idx.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	return hits
}

func wantCount(t *testing.T, idx vectorindex.Index, want int) {
	t.Helper()
	n, err := idx.Count(context.Background())
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	if n != want {
		t.Fatalf("count = %d, want %d", n, want)
	}
}

func hitIDs(hits []vectorindex.Hit) []string {
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	return ids
}

func byID(vs []vectorindex.Vector) map[string]vectorindex.Vector {
	m := make(map[string]vectorindex.Vector, len(vs))
	for _, v := range vs {
		m[v.ID] = v
	}
	return m
}

// RandomVectors returns n random unit vectors of dimension dim with IDs
// prefix-0000, prefix-0001, …; benchmarks index them.
func RandomVectors(rng *rand.Rand, n, dim int, prefix string) []vectorindex.Vector {
	return randomVectors(rng, n, dim, prefix)
}

// RandomUnit returns a random vector of length 1 in dim dimensions.
func RandomUnit(rng *rand.Rand, dim int) []float32 { return randomUnit(rng, dim) }

func randomUnit(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		x := rng.NormFloat64()
		v[i] = float32(x)
		norm += x * x
	}
	scale(v, 1/math.Sqrt(norm))
	return v
}

func randomVectors(rng *rand.Rand, n, dim int, prefix string) []vectorindex.Vector {
	vs := make([]vectorindex.Vector, n)
	for i := range vs {
		vs[i] = vectorindex.Vector{ID: fmt.Sprintf("%s-%04d", prefix, i), Embedding: randomUnit(rng, dim)}
	}
	return vs
}

func scale(v []float32, f float64) {
	for i := range v {
		v[i] = float32(float64(v[i]) * f)
	}
}

// axis returns the unit vector along dimension i.
func axis(dim, i int) []float32 {
	v := make([]float32, dim)
	v[i] = 1
	return v
}

// atCosine returns a unit vector at cosine c to axis 0, in the plane of
// axes 0 and 1.
func atCosine(dim int, c float64) []float32 {
	v := make([]float32, dim)
	v[0] = float32(c)
	v[1] = float32(math.Sqrt(1 - c*c))
	return v
}
