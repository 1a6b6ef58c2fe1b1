package chroma

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/indextest"
)

// BenchmarkQuery measures one classification's similarity lookup against
// the pinned local Chroma server, HTTP round trip included: the top 10 at
// cosine ≥ 0.8 among 10k vectors (scaled by testenv.BenchSize) of
// dimension 384.
func BenchmarkQuery(b *testing.B) {
	n := testenv.BenchSize(b, 10_000)
	spec := vectorindex.Spec{Embedder: "bench", Dimension: 384}
	idx, _, err := Open(context.Background(), Options{URL: testenv.Chroma(b), CollectionPrefix: prefix("bench"), Spec: spec})
	if err != nil {
		b.Fatal(err)
	}
	defer idx.Close()
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		vs := indextest.RandomVectors(rng, min(1000, n-i), spec.Dimension, fmt.Sprint("b", i))
		for j := range vs {
			vs[j].Metadata = map[string]string{"agent": fmt.Sprint("agent-", (i+j)%10)}
		}
		if err := idx.Upsert(context.Background(), vs); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("indexed %d vectors in %s", n, time.Since(start))
	queries := make([][]float32, 256)
	for i := range queries {
		queries[i] = indextest.RandomUnit(rng, spec.Dimension)
	}
	for _, where := range []map[string]string{nil, {"agent": "agent-3"}} {
		name := fmt.Sprintf("n=%d", n)
		if where != nil {
			name += "/where-agent"
		}
		b.Run(name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := range b.N {
				start := time.Now()
				_, err := idx.Query(context.Background(), vectorindex.Query{Embedding: queries[i%len(queries)], Limit: 10, MinSimilarity: 0.8, Where: where})
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(lat)
			at := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
		})
	}
}
