package chromem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/indextest"
)

// benchSpec matches precept's local embedder's size.
var benchSpec = vectorindex.Spec{Embedder: "bench", Dimension: 384}

// benchAgents spreads vectors over agents so a Where on one agent keeps a
// tenth of them.
const benchAgents = 10

// buildIndex fills a new index in dir with n random vectors, upserted in
// batches of 1,000 as a re-index would.
func buildIndex(b *testing.B, dir string, n int) *Index {
	b.Helper()
	idx, _, err := Open(dir, benchSpec)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	for start := 0; start < n; start += 1000 {
		vs := indextest.RandomVectors(rng, min(1000, n-start), benchSpec.Dimension, fmt.Sprint("b", start))
		for i := range vs {
			// What the evaluator stores: few agents and categories,
			// hundreds of reviewers, more epics and clusters; together
			// nearly every row's metadata is its own.
			vs[i].Metadata = map[string]string{
				"agent": fmt.Sprint("agent-", (start+i)%benchAgents), "reviewer_id": fmt.Sprint("reviewer-", rng.IntN(400)),
				"epic_id": fmt.Sprint("EPIC-", rng.IntN(2000)), "category": fmt.Sprint("category-", rng.IntN(60)),
				"cluster_id": fmt.Sprint("c-", rng.IntN(5000)),
			}
			vs[i].Document = "a reviewer comment of typical length, about a hundred characters, saying what was wrong"
		}
		if err := idx.Upsert(context.Background(), vs); err != nil {
			b.Fatal(err)
		}
	}
	return idx
}

// BenchmarkQuery measures one classification's similarity lookup: the top
// 10 at cosine ≥ 0.8 (random vectors rarely reach it, so every vector is
// scored and few are returned), among 10k and 100k vectors
// (testenv.BenchSizes).
func BenchmarkQuery(b *testing.B) {
	for _, n := range testenv.BenchSizes(b) {
		idx := buildIndex(b, b.TempDir(), n)
		rng := rand.New(rand.NewPCG(7, 7))
		queries := make([][]float32, 256)
		for i := range queries {
			queries[i] = indextest.RandomUnit(rng, benchSpec.Dimension)
		}
		for _, filtered := range []bool{false, true} {
			name := fmt.Sprintf("n=%d", n)
			var where map[string]string
			if filtered {
				name += "/where-agent"
				where = map[string]string{"agent": "agent-3"}
			}
			b.Run(name, func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					start := time.Now()
					_, err := idx.Query(context.Background(), vectorindex.Query{Embedding: queries[i%len(queries)], Limit: 10, MinSimilarity: 0.8, Where: where})
					lat = append(lat, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
				}
				reportPercentiles(b, lat)
			})
		}
		b.Run(fmt.Sprintf("n=%d/batch=256", n), func(b *testing.B) { benchBatch(b, idx, queries, false) })
		b.Run(fmt.Sprintf("n=%d/batch=256/where-agent", n), func(b *testing.B) { benchBatch(b, idx, queries, true) })
		if err := idx.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBatch measures a batch of 256 classification lookups, as the
// evaluator makes for a full batch of decisions: answered as one batch
// (QueryBatch) and, in the same run, as separate queries two at a time on
// 2 cores, which is how the evaluator asked before batches. Each reports
// milliseconds per query; the ratio is separate over batched. With
// perAgent each query keeps one agent's vectors, the agents in turn, as
// the evaluator asks (docs/lessons.md, "Similar decisions").
func benchBatch(b *testing.B, idx *Index, queries [][]float32, perAgent bool) {
	qs := make([]vectorindex.Query, len(queries))
	for i, q := range queries {
		qs[i] = vectorindex.Query{Embedding: q, Limit: 10, MinSimilarity: 0.8}
		if perAgent {
			qs[i].Where = map[string]string{"agent": fmt.Sprint("agent-", i%benchAgents)}
		}
	}
	ctx := context.Background()
	var batched, separate time.Duration
	for range b.N {
		start := time.Now()
		if _, err := idx.QueryBatch(ctx, qs); err != nil {
			b.Fatal(err)
		}
		batched += time.Since(start)
		start = time.Now()
		// hidden is not a BatchQuerier: QueryAll asks query by query.
		hidden := struct{ vectorindex.Index }{idx}
		if _, err := vectorindex.QueryAll(ctx, hidden, qs, runtime.GOMAXPROCS(0)); err != nil {
			b.Fatal(err)
		}
		separate += time.Since(start)
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N*len(qs)) }
	b.ReportMetric(per(batched), "batched-ms/query")
	b.ReportMetric(per(separate), "separate-ms/query")
	b.ReportMetric(float64(separate)/float64(batched), "separate/batched")
}

// BenchmarkUpsert measures write throughput: one vector per call, as the
// consumer indexes each decision (one journal fsync each), and 1,000 per
// call, as a re-index does.
func BenchmarkUpsert(b *testing.B) {
	for _, batch := range []int{1, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			idx, _, err := Open(b.TempDir(), benchSpec)
			if err != nil {
				b.Fatal(err)
			}
			defer idx.Close()
			rng := rand.New(rand.NewPCG(3, 3))
			pool := indextest.RandomVectors(rng, 4096, benchSpec.Dimension, "u")
			b.ResetTimer()
			for i := range b.N {
				vs := make([]vectorindex.Vector, batch)
				for j := range vs {
					vs[j] = pool[(i*batch+j)%len(pool)]
					vs[j].ID = fmt.Sprint("u-", i*batch+j)
				}
				if err := idx.Upsert(context.Background(), vs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "vectors/s")
		})
	}
}

// BenchmarkReopen measures start-up: opening a 100k-vector index
// (scaled by testenv.BenchSize) from disk and replaying its journal.
func BenchmarkReopen(b *testing.B) {
	n := testenv.BenchSize(b, 100_000)
	dir := b.TempDir()
	if err := buildIndex(b, dir, n).Close(); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
		for range b.N {
			idx, reset, err := Open(dir, benchSpec)
			if err != nil {
				b.Fatal(err)
			}
			if reset {
				b.Fatal("reopen reset the index")
			}
			if err := idx.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/open")
	})
}

// BenchmarkHeapPerVector measures what the index holds in memory for each
// stored vector (ID, codes, scale, residual, metadata number, journal
// location, map entry), at 100k vectors (scaled by testenv.BenchSize),
// and reports it against one float32 copy of the vector, which the index
// kept twice before it held codes.
func BenchmarkHeapPerVector(b *testing.B) {
	n := testenv.BenchSize(b, 100_000)
	var perVector float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		idx := buildIndex(b, b.TempDir(), n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perVector = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		if err := idx.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perVector, "heap-B/vector")
	b.ReportMetric(perVector/float64(4*benchSpec.Dimension), "ratio-to-one-float32-copy")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
