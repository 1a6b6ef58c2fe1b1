package indextest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// The contract of an index's life: reopening, a changed spec, closing,
// cancelling, and concurrent use.

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
	if _, err := idx.Embeddings(ctx, []string{"a"}); !errors.Is(err, vectorindex.ErrClosed) {
		t.Errorf("embeddings after close: %v, want ErrClosed", err)
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
	if _, err := idx.Embeddings(ctx, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("embeddings: %v, want context.Canceled", err)
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
