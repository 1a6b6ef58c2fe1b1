// Package chromem is the embedded vectorindex.Index, precept's default: an
// in-process chromem-go collection persisted under the data dir.
//
// The directory holds spec.json (the Spec the vectors were made with),
// journal (every upsert and delete, see journal.go) and LOCK. Opening a
// directory with another Spec, or one whose files are missing or damaged,
// empties it and reports a reset, so the caller re-indexes from the durable
// feedback store instead of mixing embeddings.
//
// chromem-go searches exhaustively: a query costs one dot product per
// stored vector, which is what bounds latency at large sizes (see the
// package benchmarks).
package chromem

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/precept-dev/precept/lib/durable"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	chromemgo "github.com/philippgille/chromem-go"

	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/internal/topk"
)

// ErrLocked reports an index directory another open Index holds.
var ErrLocked = errors.New("vectorindex/chromem: index directory is locked")

const (
	specFile    = "spec.json"
	journalFile = "journal"
	lockFile    = "LOCK"
	// specFormat versions the directory layout; another value resets.
	specFormat = 1
	// collectionName is the single chromem-go collection an index uses.
	collectionName = "feedback"
	// compactMinDead is how many dead journal records must pile up before
	// a rewrite is worth its I/O.
	compactMinDead = 1024
)

var _ vectorindex.Index = (*Index)(nil)

// errNoTextEmbedding is what chromem-go gets if it ever tries to embed
// text itself; without it chromem-go would call OpenAI.
var errNoTextEmbedding = errors.New("vectorindex/chromem: the index does not embed text")

func refuseTextEmbedding(context.Context, string) ([]float32, error) {
	return nil, errNoTextEmbedding
}

// Index is a vectorindex.Index backed by chromem-go. It is safe for
// concurrent use; queries do not wait for journal I/O.
type Index struct {
	spec vectorindex.Spec
	dir  string

	// writeMu serialises writers (Upsert, Delete, compaction, Close) and
	// guards the files.
	writeMu  sync.Mutex
	journal  *os.File
	size     int64 // bytes of the journal known to be complete
	records  int   // records in the journal
	writeErr error // set when the journal may hold a partial append
	lock     *os.File

	// mu guards the in-memory state against writers; readers hold it
	// shared for a whole query so the collection cannot change under them.
	mu     sync.RWMutex
	closed bool
	col    *chromemgo.Collection
	ids    map[string]struct{}
	// flat mirrors the collection's vectors for fast unfiltered queries.
	flat *flat
}

// storedSpec is spec.json.
type storedSpec struct {
	Format    int    `json:"format"`
	Embedder  string `json:"embedder"`
	Dimension int    `json:"dimension"`
}

// Open opens or creates the index in dir for spec. reset is true when the
// index starts empty because dir was new, was made with another Spec or
// could not be read back; the caller then re-indexes everything from the
// durable feedback store. Only one Index may hold dir at a time.
func Open(dir string, spec vectorindex.Spec) (idx *Index, reset bool, err error) {
	if err := spec.Validate(); err != nil {
		return nil, false, fmt.Errorf("open vector index: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("open vector index: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, false, fmt.Errorf("open vector index: %w", err)
	}
	x := &Index{spec: spec, dir: dir, lock: lock, ids: map[string]struct{}{}, flat: newFlat(spec.Dimension)}
	defer func() {
		if err != nil {
			x.release()
		}
	}()
	db := chromemgo.NewDB()
	if x.col, err = db.CreateCollection(collectionName, nil, refuseTextEmbedding); err != nil {
		return nil, false, fmt.Errorf("open vector index: %w", err)
	}

	reset = !x.specMatches()
	if !reset {
		var loadErr error
		if reset, loadErr = x.load(); loadErr != nil {
			return nil, false, fmt.Errorf("open vector index: %w", loadErr)
		}
	}
	if reset {
		if err := x.resetFiles(); err != nil {
			return nil, false, fmt.Errorf("reset vector index: %w", err)
		}
	}
	if x.journal, err = os.OpenFile(filepath.Join(dir, journalFile), os.O_WRONLY, 0); err != nil {
		return nil, false, fmt.Errorf("open vector index: %w", err)
	}
	if err := x.journal.Truncate(x.size); err != nil {
		return nil, false, fmt.Errorf("open vector index: drop torn journal tail: %w", err)
	}
	if x.shouldCompact() {
		if err := x.compact(); err != nil {
			return nil, false, fmt.Errorf("open vector index: %w", err)
		}
	}
	return x, reset, nil
}

// specMatches reports whether spec.json records this index's spec.
func (x *Index) specMatches() bool {
	b, err := os.ReadFile(filepath.Join(x.dir, specFile))
	if err != nil {
		return false
	}
	var s storedSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return false
	}
	return s == storedSpec{Format: specFormat, Embedder: x.spec.Embedder, Dimension: x.spec.Dimension}
}

// load replays the journal into the collection. A missing or corrupt
// journal means reset, not an error: the vectors can be rebuilt.
func (x *Index) load() (reset bool, err error) {
	latest := map[string]record{}
	size, err := replay(filepath.Join(x.dir, journalFile), x.spec.Dimension, func(r record) {
		x.records++
		if r.op == opDelete {
			delete(latest, r.id)
			return
		}
		latest[r.id] = r
	})
	if errors.Is(err, errCorrupt) || errors.Is(err, fs.ErrNotExist) {
		x.records = 0
		return true, nil
	}
	if err != nil {
		return false, err
	}
	x.size = size
	ctx := context.Background()
	for _, r := range latest {
		if err := x.col.AddDocument(ctx, document(r.id, r.vector, cloneMetadata(r.metadata), r.document)); err != nil {
			return false, fmt.Errorf("load vector %q: %w", r.id, err)
		}
		x.ids[r.id] = struct{}{}
		x.flat.upsert(r.id, r.vector)
	}
	return false, nil
}

// resetFiles empties the directory's index files and records the spec.
// spec.json goes first and comes back last, so a crash in between leaves
// a directory that resets again on the next open.
func (x *Index) resetFiles() error {
	for _, name := range []string{specFile, journalFile, journalFile + ".tmp", specFile + ".tmp"} {
		if err := os.Remove(filepath.Join(x.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := writeFileSync(filepath.Join(x.dir, journalFile), []byte(journalMagic)); err != nil {
		return err
	}
	b, err := json.Marshal(storedSpec{Format: specFormat, Embedder: x.spec.Embedder, Dimension: x.spec.Dimension})
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(x.dir, specFile+".tmp"), b); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(x.dir, specFile+".tmp"), filepath.Join(x.dir, specFile)); err != nil {
		return err
	}
	x.size = int64(len(journalMagic))
	x.records = 0
	return durable.SyncDir(x.dir)
}

// Spec returns the spec the index was opened with.
func (x *Index) Spec() vectorindex.Spec { return x.spec }

// InProcess reports that the index lives in this process: reading its
// vectors costs no round trip.
func (x *Index) InProcess() bool { return true }

// Upsert stores vectors durably, replacing vectors with the same IDs.
func (x *Index) Upsert(ctx context.Context, vectors []vectorindex.Vector) error {
	vectors, err := vectorindex.PrepareUpsert(ctx, x.spec, vectors)
	if err != nil {
		return err
	}
	if len(vectors) == 0 {
		return x.checkOpen()
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if err := x.checkWritable(); err != nil {
		return fmt.Errorf("upsert vectors: %w", err)
	}
	docs := make([]chromemgo.Document, len(vectors))
	var buf bytes.Buffer
	for i, v := range vectors {
		// The index keeps its own copies: callers may reuse their slices
		// and maps, and chromem-go v0.7.0 stores the metadata map it is
		// given.
		docs[i] = document(v.ID, slices.Clone(v.Embedding), cloneMetadata(v.Metadata), v.Document)
		appendRecord(&buf, record{op: opUpsert, id: v.ID, document: v.Document, metadata: v.Metadata, vector: v.Embedding})
	}
	if err := x.appendJournal(buf.Bytes(), len(vectors)); err != nil {
		return fmt.Errorf("upsert vectors: %w", err)
	}
	x.mu.Lock()
	for _, d := range docs {
		// AddDocument only fails on an empty ID or embedding, which
		// PrepareUpsert has ruled out.
		if err := x.col.AddDocument(context.Background(), d); err != nil {
			x.mu.Unlock()
			x.writeErr = fmt.Errorf("index diverged from its journal: %w", err)
			return fmt.Errorf("upsert vectors: %w", err)
		}
		x.ids[d.ID] = struct{}{}
		x.flat.upsert(d.ID, d.Embedding)
	}
	x.mu.Unlock()
	return x.maybeCompact()
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
	where := q.Where
	if len(where) == 0 {
		return x.queryFlat(ctx, q)
	}
	search := func(ctx context.Context, n int) ([]vectorindex.Hit, error) {
		res, err := x.col.QueryEmbedding(ctx, q.Embedding, n, where, nil)
		if err != nil {
			return nil, err
		}
		hits := make([]vectorindex.Hit, len(res))
		for i, r := range res {
			hits[i] = vectorindex.Hit{
				ID:         r.ID,
				Similarity: vectorindex.ClampSimilarity(float64(r.Similarity)),
				Document:   r.Content,
			}
			// r.Metadata is the collection's own map.
			hits[i].Metadata = cloneMetadata(r.Metadata)
		}
		return hits, nil
	}
	hits, err := topk.Select(ctx, q.Limit, x.col.Count(), q.MinSimilarity, search)
	if err != nil {
		return nil, fmt.Errorf("query vectors: %w", err)
	}
	return hits, nil
}

// queryFlat answers an unfiltered query from the contiguous mirror and
// takes metadata and documents from the collection; the caller holds mu.
func (x *Index) queryFlat(ctx context.Context, q vectorindex.Query) ([]vectorindex.Hit, error) {
	// float32 similarities are compared with the float64 threshold after
	// conversion; scan a hair below it so rounding loses no hit.
	found := x.flat.search(q.Embedding, q.Limit, float32(q.MinSimilarity)-1e-6)
	var hits []vectorindex.Hit
	for _, f := range found {
		sim := vectorindex.ClampSimilarity(float64(f.sim))
		if sim < q.MinSimilarity {
			continue
		}
		doc, err := x.col.GetByID(ctx, f.id)
		if err != nil {
			return nil, fmt.Errorf("query vectors: %w", err)
		}
		hits = append(hits, vectorindex.Hit{ID: f.id, Similarity: sim, Metadata: cloneMetadata(doc.Metadata), Document: doc.Content})
	}
	return hits, nil
}

// Embeddings returns stored embeddings from the contiguous mirror, which
// holds them normalised.
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
	for _, id := range ids {
		if i, ok := x.flat.pos[id]; ok {
			out[id] = slices.Clone(x.flat.vecs[i*x.flat.dim : (i+1)*x.flat.dim])
		}
	}
	return out, nil
}

// Delete removes the vectors with the given IDs durably.
func (x *Index) Delete(ctx context.Context, ids []string) error {
	ids, err := vectorindex.PrepareDelete(ctx, ids)
	if err != nil {
		return err
	}
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	if err := x.checkWritable(); err != nil {
		return fmt.Errorf("delete vectors: %w", err)
	}
	x.mu.RLock()
	present := slices.DeleteFunc(ids, func(id string) bool {
		_, ok := x.ids[id]
		return !ok
	})
	x.mu.RUnlock()
	if len(present) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, id := range present {
		appendRecord(&buf, record{op: opDelete, id: id})
	}
	if err := x.appendJournal(buf.Bytes(), len(present)); err != nil {
		return fmt.Errorf("delete vectors: %w", err)
	}
	x.mu.Lock()
	err = x.col.Delete(context.Background(), nil, nil, present...)
	for _, id := range present {
		delete(x.ids, id)
		x.flat.delete(id)
	}
	x.mu.Unlock()
	if err != nil {
		x.writeErr = fmt.Errorf("index diverged from its journal: %w", err)
		return fmt.Errorf("delete vectors: %w", err)
	}
	return x.maybeCompact()
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
	return x.col.Count(), nil
}

// Close compacts the journal when it is mostly dead records, closes it and
// releases the directory.
func (x *Index) Close() error {
	x.writeMu.Lock()
	defer x.writeMu.Unlock()
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	x.mu.Unlock()
	var errs []error
	if x.writeErr == nil && x.shouldCompact() {
		errs = append(errs, x.compact())
	}
	if x.journal != nil {
		errs = append(errs, x.journal.Close())
		x.journal = nil
	}
	x.release()
	x.mu.Lock()
	x.col, x.ids, x.flat = nil, nil, nil
	x.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close vector index: %w", err)
	}
	return nil
}

// release closes the journal, if open, and unlocks the directory.
func (x *Index) release() {
	if x.journal != nil {
		x.journal.Close()
		x.journal = nil
	}
	if x.lock != nil {
		x.lock.Close()
		x.lock = nil
	}
}

func (x *Index) checkOpen() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return vectorindex.ErrClosed
	}
	return nil
}

// checkWritable is called with writeMu held.
func (x *Index) checkWritable() error {
	if err := x.checkOpen(); err != nil {
		return err
	}
	return x.writeErr
}

// appendJournal writes and syncs one batch of records; on failure it cuts
// the journal back so no partial batch is left behind. Called with writeMu
// held.
func (x *Index) appendJournal(b []byte, records int) error {
	_, err := x.journal.WriteAt(b, x.size)
	if err == nil {
		err = x.journal.Sync()
	}
	if err != nil {
		if terr := x.journal.Truncate(x.size); terr != nil {
			x.writeErr = fmt.Errorf("journal may hold a partial write: %w", terr)
		}
		return fmt.Errorf("append journal: %w", err)
	}
	x.size += int64(len(b))
	x.records += records
	return nil
}

// shouldCompact reports whether dead records outnumber live ones by
// enough to rewrite the journal. Called with writeMu held or before the
// index is shared.
func (x *Index) shouldCompact() bool {
	dead := x.records - len(x.ids)
	return dead >= compactMinDead && dead > len(x.ids)
}

func (x *Index) maybeCompact() error {
	if !x.shouldCompact() {
		return nil
	}
	if err := x.compact(); err != nil {
		// The old journal is intact; compaction is retried later.
		return fmt.Errorf("compact journal: %w", err)
	}
	return nil
}

// compact rewrites the journal with one record per live vector, next to
// the old one, and renames it into place. Queries go on meanwhile. Called
// with writeMu held.
func (x *Index) compact() error {
	x.mu.RLock()
	ids := slices.Sorted(maps.Keys(x.ids))
	x.mu.RUnlock()
	tmp := filepath.Join(x.dir, journalFile+".tmp")
	size, err := x.writeSnapshot(tmp, ids)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	path := filepath.Join(x.dir, journalFile)
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := durable.SyncDir(x.dir); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		// The new journal is in place but cannot be appended to.
		x.writeErr = fmt.Errorf("reopen compacted journal: %w", err)
		return x.writeErr
	}
	if x.journal != nil {
		x.journal.Close()
	}
	x.journal = f
	x.size = size
	x.records = len(ids)
	return nil
}

// writeSnapshot writes a journal holding one upsert per ID to path and
// returns its size.
func (x *Index) writeSnapshot(path string, ids []string) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	size, _ := w.WriteString(journalMagic)
	var buf bytes.Buffer
	for _, id := range ids {
		d, err := x.col.GetByID(context.Background(), id)
		if err != nil {
			return 0, fmt.Errorf("read vector %q: %w", id, err)
		}
		buf.Reset()
		appendRecord(&buf, record{op: opUpsert, id: d.ID, document: d.Content, metadata: d.Metadata, vector: d.Embedding})
		n, err := w.Write(buf.Bytes())
		if err != nil {
			return 0, err
		}
		size += n
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return int64(size), f.Close()
}

func document(id string, embedding []float32, metadata map[string]string, content string) chromemgo.Document {
	return chromemgo.Document{ID: id, Embedding: embedding, Metadata: metadata, Content: content}
}

// cloneMetadata copies m, or returns nil when it is empty, so hits carry
// nil metadata the way the Chroma backend's do.
func cloneMetadata(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
