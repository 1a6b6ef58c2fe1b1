package chromem

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// The contiguous mirror must answer exactly as chromem-go does: a filter
// that matches every vector sends the query through chromem-go, no filter
// through the mirror.
func TestTheFlatMirrorAgreesWithChromemGo(t *testing.T) {
	spec := vectorindex.Spec{Embedder: "test", Dimension: 37}
	idx, _, err := Open(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	rng := rand.New(rand.NewSource(7))
	vec := func() []float32 {
		v := make([]float32, spec.Dimension)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	ctx := context.Background()
	var vs []vectorindex.Vector
	for i := range 5000 {
		vs = append(vs, vectorindex.Vector{ID: fmt.Sprintf("v%04d", i), Embedding: vec(), Metadata: map[string]string{"all": "yes"}})
	}
	// Duplicates make ties, which must order by id on both paths.
	for i := range 20 {
		vs = append(vs, vectorindex.Vector{ID: fmt.Sprintf("dup%02d", i), Embedding: vs[3].Embedding, Metadata: map[string]string{"all": "yes"}})
	}
	if err := idx.Upsert(ctx, vs); err != nil {
		t.Fatal(err)
	}
	if err := idx.Delete(ctx, []string{"v0010", "v4999"}); err != nil {
		t.Fatal(err)
	}
	queries := [][]float32{vs[3].Embedding, vec(), vec()}
	for qi, q := range queries {
		for _, limit := range []int{1, 10, 25} {
			flat, err := idx.Query(ctx, vectorindex.Query{Embedding: q, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			viaChromem, err := idx.Query(ctx, vectorindex.Query{Embedding: q, Limit: limit, Where: map[string]string{"all": "yes"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(flat) != len(viaChromem) {
				t.Fatalf("query %d limit %d: %d vs %d hits", qi, limit, len(flat), len(viaChromem))
			}
			for i := range flat {
				if flat[i].ID != viaChromem[i].ID || math.Abs(flat[i].Similarity-viaChromem[i].Similarity) > 1e-5 || flat[i].Metadata["all"] != "yes" {
					t.Fatalf("query %d limit %d hit %d: flat %s %.7f, chromem-go %s %.7f", qi, limit, i, flat[i].ID, flat[i].Similarity, viaChromem[i].ID, viaChromem[i].Similarity)
				}
			}
		}
	}
}
