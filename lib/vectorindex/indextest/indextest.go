// Package indextest holds the contract tests every vectorindex.Index
// backend must pass. A backend's test calls Run with a function that opens
// its index; results are checked against a brute-force cosine computed here.
package indextest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/vectorindex"
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
		{"EmbeddingsReturnsStoredVectorsNormalised", testEmbeddings},
		{"QueryAllAnswersEachQueryAsQueryDoes", testQueryAll},
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
