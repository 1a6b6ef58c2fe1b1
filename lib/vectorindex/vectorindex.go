// Package vectorindex defines the similarity index precept keeps beside its
// durable feedback store (docs/architecture.md): one vector per feedback record,
// searched by cosine similarity to cluster similar feedback.
//
// Two backends implement Index and pass the same contract tests
// (package indextest): chromem, embedded and persisted under the data dir,
// and chroma, a Chroma server. Vectors come from precept's own embedder; an
// index never embeds text. The Spec (embedder name and dimension) is
// recorded with each index, so vectors of different embedders are never
// mixed: opening an index with another Spec starts it empty and reports a
// reset, and the caller re-indexes from the durable store.
package vectorindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"
)

// Errors callers branch on with errors.Is.
var (
	// ErrDimension reports an embedding whose length differs from the
	// index's Spec.Dimension.
	ErrDimension = errors.New("vectorindex: embedding has the wrong dimension")
	// ErrInvalid reports input the index cannot hold or evaluate: an empty
	// ID, a non-finite or zero embedding, a reserved metadata key, a Query
	// without a positive Limit.
	ErrInvalid = errors.New("vectorindex: invalid input")
	// ErrClosed reports a call on an index after Close.
	ErrClosed = errors.New("vectorindex: index is closed")
)

// MaxDimension bounds Spec.Dimension; no embedding model precept talks to
// comes near it, and it keeps a corrupt spec from allocating gigabytes.
const MaxDimension = 1 << 16

// Spec identifies the embeddings an index holds; it is recorded with the
// index.
type Spec struct {
	// Embedder names the embedding model and its version, e.g.
	// "local-ngram-v1" or "openai/text-embedding-3-small".
	Embedder string
	// Dimension is the length of every embedding.
	Dimension int
}

// String returns the spec as "embedder/dimension".
func (s Spec) String() string { return fmt.Sprintf("%s/%d", s.Embedder, s.Dimension) }

// Validate reports whether s can describe an index.
func (s Spec) Validate() error {
	switch {
	case strings.TrimSpace(s.Embedder) == "":
		return fmt.Errorf("%w: spec has no embedder name", ErrInvalid)
	case !utf8.ValidString(s.Embedder):
		return fmt.Errorf("%w: spec embedder name is not UTF-8", ErrInvalid)
	case s.Dimension <= 0 || s.Dimension > MaxDimension:
		return fmt.Errorf("%w: spec dimension %d outside 1..%d", ErrInvalid, s.Dimension, MaxDimension)
	}
	return nil
}

// Vector is one indexed item: a feedback record's embedding with the
// metadata queries filter on and the text it was embedded from.
type Vector struct {
	ID        string
	Embedding []float32
	Metadata  map[string]string
	Document  string
}

// Validate reports whether v can be stored in an index with spec s.
func (v Vector) Validate(s Spec) error {
	if v.ID == "" {
		return fmt.Errorf("%w: vector has an empty ID", ErrInvalid)
	}
	if !utf8.ValidString(v.ID) {
		return fmt.Errorf("%w: vector ID is not UTF-8", ErrInvalid)
	}
	if err := checkEmbedding(s, v.Embedding); err != nil {
		return fmt.Errorf("vector %q: %w", v.ID, err)
	}
	for k, val := range v.Metadata {
		if err := checkMetadataKey(k); err != nil {
			return fmt.Errorf("vector %q: %w", v.ID, err)
		}
		if !utf8.ValidString(val) {
			return fmt.Errorf("vector %q: %w: metadata value of %q is not UTF-8", v.ID, ErrInvalid, k)
		}
	}
	if !utf8.ValidString(v.Document) {
		return fmt.Errorf("vector %q: %w: document is not UTF-8", v.ID, ErrInvalid)
	}
	return nil
}

// Hit is one query result.
type Hit struct {
	ID string
	// Similarity is the cosine similarity to the query, in [-1, 1].
	Similarity float64
	Metadata   map[string]string
	Document   string
}

// Query asks for the vectors most similar to Embedding.
type Query struct {
	Embedding []float32
	// Limit is the maximum number of hits; it must be positive.
	Limit int
	// MinSimilarity drops hits whose cosine similarity is below it.
	MinSimilarity float64
	// Where keeps only vectors whose metadata has every key with exactly
	// the given value; nil or empty means no filter. Values must not be
	// empty: backends disagree on whether "" matches a missing key.
	Where map[string]string
}

// Validate reports whether q can be evaluated against an index with spec s.
func (q Query) Validate(s Spec) error {
	if q.Limit <= 0 {
		return fmt.Errorf("%w: query limit %d, want > 0", ErrInvalid, q.Limit)
	}
	if math.IsNaN(q.MinSimilarity) {
		return fmt.Errorf("%w: query minimum similarity is NaN", ErrInvalid)
	}
	if err := checkEmbedding(s, q.Embedding); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	for k, v := range q.Where {
		if err := checkMetadataKey(k); err != nil {
			return fmt.Errorf("query filter: %w", err)
		}
		if v == "" || !utf8.ValidString(v) {
			return fmt.Errorf("%w: query filter value of %q must be non-empty UTF-8", ErrInvalid, k)
		}
	}
	return nil
}

// Index is a similarity index over feedback embeddings. Implementations are
// safe for concurrent use.
type Index interface {
	// Spec returns the spec the index was opened with.
	Spec() Spec
	// Upsert stores vectors, replacing any stored vector with the same ID
	// (embedding, metadata and document alike). It is idempotent. Invalid
	// input (ErrDimension, ErrInvalid) rejects the whole call before
	// anything is stored; within one call the last vector with an ID wins.
	Upsert(ctx context.Context, vectors []Vector) error
	// Query returns up to q.Limit hits with similarity ≥ q.MinSimilarity,
	// by similarity descending, ties by ID ascending.
	Query(ctx context.Context, q Query) ([]Hit, error)
	// Delete removes the vectors with the given IDs; missing IDs are not
	// an error.
	Delete(ctx context.Context, ids []string) error
	// Count returns the number of stored vectors.
	Count(ctx context.Context) (int, error)
	// Embeddings returns the stored embeddings of the given IDs, normalised
	// to unit length; IDs not stored are left out. Re-clustering reads a
	// group's vectors back with it rather than embedding texts again.
	Embeddings(ctx context.Context, ids []string) (map[string][]float32, error)
	// Close releases the index; later calls return ErrClosed. Closing
	// twice is not an error.
	Close() error
}

// PrepareUpsert validates vectors against s and returns them with one
// entry per ID, the last one given winning, in the order IDs first appear.
// Backends call it before storing anything, so a bad vector, or a done
// ctx, rejects the whole batch; its errors say "upsert vectors".
func PrepareUpsert(ctx context.Context, s Spec, vectors []Vector) ([]Vector, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("upsert vectors: %w", err)
	}
	pos := make(map[string]int, len(vectors))
	out := make([]Vector, 0, len(vectors))
	for _, v := range vectors {
		if err := v.Validate(s); err != nil {
			return nil, fmt.Errorf("upsert vectors: %w", err)
		}
		if i, ok := pos[v.ID]; ok {
			out[i] = v
			continue
		}
		pos[v.ID] = len(out)
		out = append(out, v)
	}
	return out, nil
}

// PrepareQuery validates q against s; a done ctx rejects it too. Its
// errors say "query vectors".
func PrepareQuery(ctx context.Context, s Spec, q Query) error {
	if err := q.Validate(s); err != nil {
		return fmt.Errorf("query vectors: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("query vectors: %w", err)
	}
	return nil
}

// PrepareDelete validates ids and returns them without duplicates; a
// done ctx rejects them. Its errors say "delete vectors".
func PrepareDelete(ctx context.Context, ids []string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("delete vectors: %w", err)
	}
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == "" {
			return nil, fmt.Errorf("delete vectors: %w: empty ID to delete", ErrInvalid)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// ClampSimilarity limits rounding noise to the range a cosine can take.
func ClampSimilarity(s float64) float64 {
	return math.Max(-1, math.Min(1, s))
}

func checkEmbedding(s Spec, e []float32) error {
	if len(e) != s.Dimension {
		return fmt.Errorf("%w: got %d, index holds %d (%s)", ErrDimension, len(e), s.Dimension, s)
	}
	var norm float64
	for _, x := range e {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: embedding has a non-finite component", ErrInvalid)
		}
		norm += f * f
	}
	if norm == 0 {
		return fmt.Errorf("%w: embedding is the zero vector", ErrInvalid)
	}
	return nil
}

// reservedKeyPrefixes are metadata key prefixes Chroma drops or reads as
// operators; rejecting them in both backends keeps them interchangeable.
var reservedKeyPrefixes = []string{"chroma:", "$", "#"}

func checkMetadataKey(k string) error {
	if k == "" || !utf8.ValidString(k) {
		return fmt.Errorf("%w: metadata key must be non-empty UTF-8", ErrInvalid)
	}
	for _, p := range reservedKeyPrefixes {
		if strings.HasPrefix(k, p) {
			return fmt.Errorf("%w: metadata key %q uses the reserved prefix %q", ErrInvalid, k, p)
		}
	}
	return nil
}

// Normalized returns v scaled to unit length (a copy); the zero vector
// stays zero.
func Normalized(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		return out
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// BatchQuerier is implemented by an Index that answers several queries
// at once, each answer the one its Query gives. The embedded index reads its rows once per
// batch instead of once per query.
type BatchQuerier interface {
	QueryBatch(ctx context.Context, qs []Query) ([][]Hit, error)
}

// QueryAll answers qs on idx, answer k for query k: in one batch when idx
// is a BatchQuerier, else with up to parallel queries at a time (a Chroma
// server answers each query in its own round trip). One failing query
// fails the call.
func QueryAll(ctx context.Context, idx Index, qs []Query, parallel int) ([][]Hit, error) {
	if b, ok := idx.(BatchQuerier); ok {
		return b.QueryBatch(ctx, qs)
	}
	out := make([][]Hit, len(qs))
	errs := make([]error, len(qs))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for k, q := range qs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[k], errs[k] = idx.Query(ctx, q)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
