// Package chroma is the vectorindex.Index backed by a Chroma server (1.x,
// HTTP API v2), through github.com/amikos-tech/chroma-go v0.3.5.
//
// Each Spec gets its own collection, named from a prefix and the Spec
// (CollectionName) and created with cosine distance; the Spec is also
// stored in the collection's metadata and checked on open. Similarity is
// 1 − cosine distance. Chroma searches an HNSW graph, so results are
// approximate at large sizes.
package chroma

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	chhttp "github.com/amikos-tech/chroma-go/pkg/commons/http"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"

	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/internal/topk"
)

// Defaults for zero Options fields.
const (
	DefaultTenant           = v2.DefaultTenant
	DefaultDatabase         = v2.DefaultDatabase
	DefaultCollectionPrefix = "precept-feedback"
	DefaultTimeout          = 30 * time.Second
)

// maxBatch caps how many records one request carries; the server's own
// limit (pre-flight max_batch_size) applies when it is lower.
const maxBatch = 1000

// Metadata keys recording the Spec on the collection.
const (
	metaEmbedder  = "precept:embedder"
	metaDimension = "precept:dimension"
	metaSpace     = "hnsw:space"
)

// ErrSpecMismatch reports a collection whose recorded Spec or distance
// function differs from the one asked for. Open never deletes such a
// collection: it may belong to another deployment.
var ErrSpecMismatch = errors.New("vectorindex/chroma: collection holds other embeddings")

// TokenHeader names the header an auth token travels in.
type TokenHeader string

// Token headers Chroma's token authentication accepts.
const (
	AuthorizationHeader TokenHeader = "Authorization" // as "Bearer <token>"
	XChromaTokenHeader  TokenHeader = "X-Chroma-Token"
)

// Options configures Open. Zero values mean the defaults above.
type Options struct {
	// URL is the server's base URL, e.g. http://localhost:8000. User
	// information in it (user:password@) is sent as basic auth and never
	// appears in errors.
	URL string
	// Tenant and Database must exist on the server.
	Tenant   string
	Database string
	// CollectionPrefix starts the collection name; it must start with a
	// letter or digit and use only [A-Za-z0-9._-].
	CollectionPrefix string
	// Spec identifies the embeddings; required.
	Spec vectorindex.Spec
	// Timeout bounds each HTTP request.
	Timeout time.Duration
	// Token, when set, authenticates every request in TokenHeader
	// (AuthorizationHeader by default).
	Token       string
	TokenHeader TokenHeader
}

// Validate fills defaults and reports whether o can be used.
func (o *Options) Validate() error {
	if err := o.Spec.Validate(); err != nil {
		return err
	}
	if o.URL == "" {
		return fmt.Errorf("%w: chroma URL is required", vectorindex.ErrInvalid)
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: chroma URL must be http(s)://host[:port][/path]", vectorindex.ErrInvalid)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%w: chroma URL must not have a query or fragment", vectorindex.ErrInvalid)
	}
	if o.Tenant == "" {
		o.Tenant = DefaultTenant
	}
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	if o.CollectionPrefix == "" {
		o.CollectionPrefix = DefaultCollectionPrefix
	}
	if !validPrefix.MatchString(o.CollectionPrefix) || strings.Contains(o.CollectionPrefix, "..") {
		return fmt.Errorf("%w: collection prefix %q: use 1-200 of [A-Za-z0-9._-], starting with a letter or digit", vectorindex.ErrInvalid, o.CollectionPrefix)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return fmt.Errorf("%w: negative timeout", vectorindex.ErrInvalid)
	}
	switch o.TokenHeader {
	case "":
		o.TokenHeader = AuthorizationHeader
	case AuthorizationHeader, XChromaTokenHeader:
	default:
		return fmt.Errorf("%w: token header %q: use %q or %q", vectorindex.ErrInvalid, o.TokenHeader, AuthorizationHeader, XChromaTokenHeader)
	}
	return nil
}

var validPrefix = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// maxEmbedderInName bounds the embedder's share of a collection name;
// Chroma allows 512 characters in all.
const maxEmbedderInName = 200

// CollectionName returns the collection an index for spec uses:
// prefix-embedder-dimension, e.g. precept-feedback-local-ngram-v1-384.
// Characters Chroma does not allow become '-'; when that changes the
// embedder name, a short hash of the exact name is appended so two
// embedders never share a collection.
func CollectionName(prefix string, spec vectorindex.Spec) string {
	var b strings.Builder
	for _, r := range spec.Embedder {
		switch {
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'):
			b.WriteRune(r)
		case r == '.' && !strings.HasSuffix(b.String(), "."):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := b.String()
	lossy := name != spec.Embedder
	if len(name) > maxEmbedderInName {
		name, lossy = name[:maxEmbedderInName], true
	}
	name = fmt.Sprintf("%s-%s-%d", prefix, name, spec.Dimension)
	if lossy {
		sum := sha256.Sum256([]byte(spec.Embedder))
		name += "-" + hex.EncodeToString(sum[:4])
	}
	return name
}

var _ vectorindex.Index = (*Index)(nil)

// Index is a vectorindex.Index stored in a Chroma collection. It is safe
// for concurrent use.
type Index struct {
	spec   vectorindex.Spec
	name   string
	batch  int
	redact func(string) string

	mu     sync.RWMutex // guards closed against Close
	closed bool
	client v2.Client
	col    v2.Collection
}

// Open connects to the server and opens the collection for opts.Spec,
// creating it when missing; reset is true when it was created, so the
// caller re-indexes everything from the durable feedback store.
func Open(ctx context.Context, opts Options) (idx *Index, reset bool, err error) {
	if err := opts.Validate(); err != nil {
		return nil, false, fmt.Errorf("open chroma index: %w", err)
	}
	client, redact, err := newClient(opts)
	if err != nil {
		return nil, false, fmt.Errorf("open chroma index: %w", err)
	}
	x := &Index{spec: opts.Spec, name: CollectionName(opts.CollectionPrefix, opts.Spec), redact: redact, client: client}
	defer func() {
		if err != nil {
			client.Close()
		}
	}()
	if err := client.PreFlight(ctx); err != nil {
		return nil, false, x.fail(ctx, "open chroma index: pre-flight", err)
	}
	x.batch = maxBatch
	if pf, ok := client.(interface{ GetPreFlightConditionsRaw() map[string]any }); ok {
		if n, ok := pf.GetPreFlightConditionsRaw()["max_batch_size"].(float64); ok && n >= 1 {
			x.batch = min(x.batch, int(n))
		}
	}
	x.col, err = client.GetCollection(ctx, x.name, v2.WithEmbeddingFunctionGet(refuseTextEmbedding{}))
	switch {
	case isStatus(err, http.StatusNotFound):
		x.col, err = client.CreateCollection(ctx, x.name,
			v2.WithEmbeddingFunctionCreate(refuseTextEmbedding{}),
			v2.WithDisableEFConfigStorage(),
			v2.WithCollectionMetadataCreate(v2.NewMetadata(
				v2.NewStringAttribute(metaSpace, string(embeddings.COSINE)),
				v2.NewStringAttribute(metaEmbedder, opts.Spec.Embedder),
				v2.NewStringAttribute(metaDimension, strconv.Itoa(opts.Spec.Dimension)),
			)),
		)
		if isStatus(err, http.StatusConflict) {
			// Another replica created it first; it is just as new.
			x.col, err = client.GetCollection(ctx, x.name, v2.WithEmbeddingFunctionGet(refuseTextEmbedding{}))
		}
		if err != nil {
			return nil, false, x.fail(ctx, "create collection "+x.name, err)
		}
		reset = true
	case err != nil:
		return nil, false, x.fail(ctx, "get collection "+x.name, err)
	}
	if err := x.checkSpec(); err != nil {
		return nil, false, fmt.Errorf("open chroma index: %w", err)
	}
	return x, reset, nil
}

// checkSpec compares the collection's recorded Spec and distance with
// the index's.
func (x *Index) checkSpec() error {
	md := x.col.Metadata()
	get := func(k string) string {
		if md == nil {
			return ""
		}
		s, _ := md.GetString(k)
		return s
	}
	embedder, dim, space := get(metaEmbedder), get(metaDimension), get(metaSpace)
	if cfg := x.col.Configuration(); cfg != nil {
		if h, ok := cfg.GetRaw("hnsw"); ok {
			if m, ok := h.(map[string]any); ok {
				if s, ok := m["space"].(string); ok {
					space = s
				}
			}
		}
	}
	want := x.spec
	if embedder != want.Embedder || dim != strconv.Itoa(want.Dimension) || space != string(embeddings.COSINE) ||
		(x.col.Dimension() > 0 && x.col.Dimension() != want.Dimension) {
		return fmt.Errorf("%w: collection %s records embedder %q, dimension %q (holds %d), space %q; want %s with cosine",
			ErrSpecMismatch, x.name, embedder, dim, x.col.Dimension(), space, want)
	}
	return nil
}

// Spec returns the spec the index was opened with.
func (x *Index) Spec() vectorindex.Spec { return x.spec }

// Collection returns the name of the Chroma collection the index uses.
func (x *Index) Collection() string { return x.name }

// Upsert stores vectors, replacing vectors with the same IDs, in requests
// of at most the server's batch size. A failure part-way leaves earlier
// batches stored; upserting again is harmless.
func (x *Index) Upsert(ctx context.Context, vectors []vectorindex.Vector) error {
	vectors, err := vectorindex.PrepareUpsert(ctx, x.spec, vectors)
	if err != nil {
		return err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return fmt.Errorf("upsert vectors: %w", vectorindex.ErrClosed)
	}
	for batch := range slices.Chunk(vectors, x.batch) {
		if err := x.upsertBatch(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// upsertBatch replaces each vector whole. Chroma merges an upsert's
// metadata into the stored record's, so keys the new metadata lacks are
// read first and sent as null, which removes them.
func (x *Index) upsertBatch(ctx context.Context, vectors []vectorindex.Vector) error {
	ids := make([]v2.DocumentID, len(vectors))
	for i, v := range vectors {
		ids[i] = v2.DocumentID(v.ID)
	}
	var old v2.GetResult
	err := retry(ctx, func() (err error) {
		old, err = x.col.Get(ctx, v2.WithIDs(ids...), v2.WithInclude(v2.IncludeMetadatas))
		return err
	})
	if err != nil {
		return x.fail(ctx, "upsert vectors: read stored metadata", err)
	}
	oldKeys := map[string][]string{}
	for i, id := range old.GetIDs() {
		if mds := old.GetMetadatas(); i < len(mds) {
			oldKeys[string(id)] = metadataKeys(mds[i])
		}
	}
	embs := make([]embeddings.Embedding, len(vectors))
	mds := make([]v2.DocumentMetadata, len(vectors))
	docs := make([]string, len(vectors))
	for i, v := range vectors {
		embs[i] = embeddings.NewEmbeddingFromFloat32(v.Embedding)
		docs[i] = v.Document
		var attrs []*v2.MetaAttribute
		for k, val := range v.Metadata {
			attrs = append(attrs, v2.NewStringAttribute(k, val))
		}
		for _, k := range oldKeys[v.ID] {
			if _, ok := v.Metadata[k]; !ok {
				attrs = append(attrs, v2.RemoveAttribute(k))
			}
		}
		if len(attrs) > 0 {
			mds[i] = v2.NewDocumentMetadata(attrs...)
		}
	}
	err = retry(ctx, func() error {
		return x.col.Upsert(ctx, v2.WithIDs(ids...), v2.WithEmbeddings(embs...), v2.WithMetadatas(mds...), v2.WithTexts(docs...))
	})
	if err != nil {
		return x.fail(ctx, "upsert vectors", err)
	}
	return nil
}

// Query returns the stored vectors most similar to q.Embedding.
func (x *Index) Query(ctx context.Context, q vectorindex.Query) ([]vectorindex.Hit, error) {
	if err := vectorindex.PrepareQuery(ctx, x.spec, q); err != nil {
		return nil, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, fmt.Errorf("query vectors: %w", vectorindex.ErrClosed)
	}
	opts := []v2.CollectionQueryOption{
		v2.WithQueryEmbeddings(embeddings.NewEmbeddingFromFloat32(q.Embedding)),
		v2.WithInclude(v2.IncludeMetadatas, v2.IncludeDocuments, v2.IncludeDistances),
	}
	fetch := func(ctx context.Context, n int, w v2.WhereFilter) ([]vectorindex.Hit, error) {
		o := slices.Concat(opts, []v2.CollectionQueryOption{v2.WithNResults(n)})
		if w != nil {
			o = append(o, v2.WithWhere(w))
		}
		var res v2.QueryResult
		err := retry(ctx, func() (err error) {
			res, err = x.col.Query(ctx, o...)
			return err
		})
		if err != nil {
			return nil, x.fail(ctx, "query vectors", err)
		}
		rr, ok := res.(interface{ Rows() []v2.ResultRow })
		if !ok {
			return nil, fmt.Errorf("query vectors: unexpected result type %T", res)
		}
		rows := rr.Rows()
		hits := make([]vectorindex.Hit, len(rows))
		for i, r := range rows {
			hits[i] = vectorindex.Hit{
				ID:         string(r.ID),
				Similarity: vectorindex.ClampSimilarity(1 - r.Score),
				Metadata:   metadataMap(r.Metadata),
				Document:   r.Document,
			}
		}
		return hits, nil
	}
	search := func(ctx context.Context, n int) ([]vectorindex.Hit, error) {
		w := where(q.Where)
		if w == nil {
			return fetch(ctx, n, nil)
		}
		return filtered(ctx, n, q, func(ctx context.Context, n int) ([]vectorindex.Hit, error) { return fetch(ctx, n, nil) },
			func(ctx context.Context, n int) ([]vectorindex.Hit, error) { return fetch(ctx, n, w) })
	}
	// The collection's size is unknown without another request; a short
	// answer from the server ends the search instead.
	return topk.Select(ctx, q.Limit, math.MaxInt32, q.MinSimilarity, search)
}

// Embeddings reads stored embeddings in batches, normalised to unit
// length as the embedded index keeps them.
func (x *Index) Embeddings(ctx context.Context, ids []string) (map[string][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read embeddings: %w", err)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, fmt.Errorf("read embeddings: %w", vectorindex.ErrClosed)
	}
	out := make(map[string][]float32, len(ids))
	for batch := range slices.Chunk(ids, x.batch) {
		docIDs := make([]v2.DocumentID, len(batch))
		for i, id := range batch {
			docIDs[i] = v2.DocumentID(id)
		}
		var res v2.GetResult
		err := retry(ctx, func() (err error) {
			res, err = x.col.Get(ctx, v2.WithIDs(docIDs...), v2.WithInclude(v2.IncludeEmbeddings))
			return err
		})
		if err != nil {
			return nil, x.fail(ctx, "read embeddings", err)
		}
		embs := res.GetEmbeddings()
		for i, id := range res.GetIDs() {
			if i < len(embs) && embs[i] != nil {
				out[string(id)] = vectorindex.Normalized(embs[i].ContentAsFloat32())
			}
		}
	}
	return out, nil
}

// Delete removes the vectors with the given IDs.
func (x *Index) Delete(ctx context.Context, ids []string) error {
	ids, err := vectorindex.PrepareDelete(ctx, ids)
	if err != nil {
		return err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return fmt.Errorf("delete vectors: %w", vectorindex.ErrClosed)
	}
	for batch := range slices.Chunk(ids, x.batch) {
		docIDs := make([]v2.DocumentID, len(batch))
		for i, id := range batch {
			docIDs[i] = v2.DocumentID(id)
		}
		if err := retry(ctx, func() error { return x.col.Delete(ctx, v2.WithIDs(docIDs...)) }); err != nil {
			return x.fail(ctx, "delete vectors", err)
		}
	}
	return nil
}

// Count returns the number of stored vectors.
func (x *Index) Count(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("count vectors: %w", err)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return 0, fmt.Errorf("count vectors: %w", vectorindex.ErrClosed)
	}
	var n int
	err := retry(ctx, func() (err error) {
		n, err = x.col.Count(ctx)
		return err
	})
	if err != nil {
		return 0, x.fail(ctx, "count vectors", err)
	}
	return n, nil
}

// Close releases the client's connections. The collection stays on the
// server.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	if err := x.client.Close(); err != nil {
		return fmt.Errorf("close chroma index: %s", x.redact(err.Error()))
	}
	return nil
}

// where turns an equality filter into Chroma's, keys in sorted order so
// requests are reproducible.
func where(m map[string]string) v2.WhereFilter {
	if len(m) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(m))
	clauses := make([]v2.WhereClause, len(keys))
	for i, k := range keys {
		clauses[i] = v2.EqString(k, m[k])
	}
	if len(clauses) == 1 {
		return clauses[0]
	}
	return v2.And(clauses...)
}

func metadataKeys(md v2.DocumentMetadata) []string {
	if k, ok := md.(interface{ Keys() []string }); ok && md != nil {
		return k.Keys()
	}
	return nil
}

// metadataMap converts a record's metadata; values precept did not write
// as strings are formatted.
func metadataMap(md v2.DocumentMetadata) map[string]string {
	keys := metadataKeys(md)
	if len(keys) == 0 {
		return nil
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		if s, ok := md.GetString(k); ok {
			m[k] = s
		} else if raw, ok := md.GetRaw(k); ok {
			m[k] = fmt.Sprint(raw)
		}
	}
	return m
}

// refuseTextEmbedding is the embedding function chroma-go is given: the
// index never embeds text, and without one chroma-go would download an
// ONNX model.
type refuseTextEmbedding struct{}

var errNoTextEmbedding = errors.New("vectorindex/chroma: the index does not embed text")

func (refuseTextEmbedding) EmbedDocuments(context.Context, []string) ([]embeddings.Embedding, error) {
	return nil, errNoTextEmbedding
}

func (refuseTextEmbedding) EmbedQuery(context.Context, string) (embeddings.Embedding, error) {
	return nil, errNoTextEmbedding
}

func (refuseTextEmbedding) Name() string { return "precept-external" }

func (refuseTextEmbedding) GetConfig() embeddings.EmbeddingFunctionConfig { return nil }

func (refuseTextEmbedding) DefaultSpace() embeddings.DistanceMetric { return embeddings.COSINE }

func (refuseTextEmbedding) SupportedSpaces() []embeddings.DistanceMetric {
	return []embeddings.DistanceMetric{embeddings.COSINE}
}

// retryAttempts and retryDelay bound retry: four tries over about 150ms.
const (
	retryAttempts = 4
	retryDelay    = 20 * time.Millisecond
)

// retry runs an idempotent request again when the server fails with a 5xx
// status. Chroma 1.0's local server answers 500 ("Error creating hnsw
// segment reader: Nothing found on disk") to requests that race its first
// flush of a collection's index, and succeeds moments later.
func retry(ctx context.Context, f func() error) error {
	delay := retryDelay
	for attempt := 1; ; attempt++ {
		err := f()
		var ce *chhttp.ChromaError
		if err == nil || attempt == retryAttempts || !errors.As(err, &ce) || ce.ErrorCode < 500 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// isStatus reports whether err is the server answering with status.
func isStatus(err error, status int) bool {
	var ce *chhttp.ChromaError
	return errors.As(err, &ce) && ce.ErrorCode == status
}
