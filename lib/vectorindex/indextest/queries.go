package indextest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// The contract of queries: ranking, filters, limits and ties.

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

// testEmbeddings reads vectors back: normalised, by ID, missing IDs left
// out, in batches larger than one request.
func testEmbeddings(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(7, 11))
	vs := randomVectors(rng, 300, defaultSpec.Dimension, "e")
	for i := range vs {
		scale(vs[i].Embedding, float64(1+i%5))
	}
	upsert(t, idx, vs...)
	ids := []string{"missing"}
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	got, err := idx.Embeddings(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(vs) {
		t.Fatalf("got %d embeddings, want %d", len(got), len(vs))
	}
	for _, v := range vs {
		want := vectorindex.Normalized(v.Embedding)
		e := got[v.ID]
		if len(e) != len(want) {
			t.Fatalf("%s: dimension %d", v.ID, len(e))
		}
		for i := range want {
			if math.Abs(float64(e[i]-want[i])) > 1e-5 {
				t.Fatalf("%s[%d] = %v, want %v", v.ID, i, e[i], want[i])
			}
		}
	}
}

// testQueryAll: a batch of queries (vectorindex.QueryAll) answers each as
// Query alone does, whatever its mix of limits, floors and filters, and
// one invalid query fails the batch.
func testQueryAll(t *testing.T, h *harness) {
	idx := h.fresh(t, defaultSpec)
	rng := rand.New(rand.NewPCG(5, 5))
	vs := randomVectors(rng, 300, defaultSpec.Dimension, "b")
	for i := range vs {
		vs[i].Metadata = map[string]string{"parity": []string{"even", "odd"}[i%2], "third": fmt.Sprint(i % 3)}
	}
	// Near-copies of a few vectors, so high floors keep some hits.
	for i := range 20 {
		e := slices.Clone(vs[i].Embedding)
		e[i%defaultSpec.Dimension] += 0.05
		vs = append(vs, vectorindex.Vector{ID: fmt.Sprintf("near%02d", i), Embedding: e, Metadata: vs[i].Metadata})
	}
	upsert(t, idx, vs...)
	var qs []vectorindex.Query
	for i := range 40 {
		q := vectorindex.Query{Embedding: randomUnit(rng, defaultSpec.Dimension), Limit: 1 + i%12, MinSimilarity: -1}
		switch i % 5 {
		case 1:
			q.Embedding, q.MinSimilarity = slices.Clone(vs[i].Embedding), 0.8
		case 2:
			q.Where = map[string]string{"parity": "odd"}
		case 3:
			q.Where = map[string]string{"parity": "even", "third": "1"}
		case 4:
			q.Where = map[string]string{"parity": "none"} // no vector holds it
		}
		if i == 7 {
			q.Limit = math.MaxInt32
		}
		qs = append(qs, q)
	}
	got, err := vectorindex.QueryAll(context.Background(), idx, qs, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(qs) {
		t.Fatalf("%d answers for %d queries", len(got), len(qs))
	}
	for k, q := range qs {
		wantHits(t, got[k], query(t, idx, q))
		wantHits(t, got[k], bruteForce(vs, q))
	}
	bad := append(slices.Clone(qs[:3]), vectorindex.Query{Embedding: qs[0].Embedding})
	if _, err := vectorindex.QueryAll(context.Background(), idx, bad, 4); !errors.Is(err, vectorindex.ErrInvalid) {
		t.Errorf("a batch with a zero-limit query: %v, want ErrInvalid", err)
	}
	if got, err := vectorindex.QueryAll(context.Background(), idx, nil, 4); err != nil || len(got) != 0 {
		t.Errorf("an empty batch: %v, %v", got, err)
	}
}
