// Package chromem is the embedded vectorindex.Index, precept's default:
// an index in this process, persisted under the data dir. (It began as a
// wrapper of chromem-go, whose name it keeps; it no longer uses it.)
//
// The directory holds spec.json (the Spec the vectors were made with),
// journal (every upsert and delete, see journal.go) and LOCK. Opening a
// directory with another Spec, or one whose files are missing or damaged,
// empties it and reports a reset, so the caller re-indexes from the durable
// feedback store instead of mixing embeddings.
//
// In memory each vector is held once, as int8 codes (rows.go, quant.go);
// the float32 vectors and the documents stay in the journal. A query
// scans every code row, then re-scores exactly the rows the scan cannot
// rule out, so its answer is the float32 answer. The scan is exhaustive:
// its cost grows with the number of stored vectors (see the package
// benchmarks and docs/decisions/0003-flat-mirror-avx2.md).
package chromem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/precept-dev/precept/lib/durable"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// ErrLocked reports an index directory another open Index holds.
var ErrLocked = errors.New("vectorindex/chromem: index directory is locked")

const (
	specFile    = "spec.json"
	journalFile = "journal"
	lockFile    = "LOCK"
	// specFormat versions the directory layout; another value resets.
	specFormat = 1
	// compactMinDead is how many dead journal records must pile up before
	// a rewrite is worth its I/O.
	compactMinDead = 1024
)

var _ vectorindex.Index = (*Index)(nil)

// Index is the embedded vectorindex.Index. It is safe for concurrent use;
// queries do not wait for journal appends.
type Index struct {
	spec vectorindex.Spec
	dir  string

	// writeMu serialises writers (Upsert, Delete, compaction, Close) and
	// guards size, records and writeErr.
	writeMu  sync.Mutex
	size     int64 // bytes of the journal known to be complete
	records  int   // records in the journal
	writeErr error // set when the journal may hold a partial append
	lock     *os.File

	// mu guards the in-memory state and the journal handle against
	// writers; readers hold it shared for a whole query. Appends write
	// through the handle past every record a reader knows, without mu;
	// compaction swaps the handle under mu.
	mu      sync.RWMutex
	closed  bool
	journal *os.File
	rows    *rows

	// queries and rescored count queries and the rows they re-scored
	// from the journal (Stats).
	queries, rescored atomic.Int64
}

// Stats is what queries have cost so far: how many ran, and how many rows
// the scan could not rule out and re-read from the journal.
type Stats struct {
	Queries, Rescored int64
}

// Stats returns the index's query counters.
func (x *Index) Stats() Stats {
	return Stats{Queries: x.queries.Load(), Rescored: x.rescored.Load()}
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
	x := &Index{spec: spec, dir: dir, lock: lock, rows: newRows(spec.Dimension)}
	defer func() {
		if err != nil {
			x.release()
		}
	}()
	reset = !x.specMatches()
	if !reset {
		var loadErr error
		if reset, loadErr = x.load(); loadErr != nil {
			return nil, false, fmt.Errorf("open vector index: %w", loadErr)
		}
	}
	if reset {
		x.rows = newRows(spec.Dimension)
		if err := x.resetFiles(); err != nil {
			return nil, false, fmt.Errorf("reset vector index: %w", err)
		}
	}
	if x.journal, err = os.OpenFile(filepath.Join(dir, journalFile), os.O_RDWR, 0); err != nil {
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

// load replays the journal into the rows, record by record, so that no
// more than one record's vector is held in float32 at a time. A missing
// or corrupt journal means reset, not an error: the vectors can be
// rebuilt.
func (x *Index) load() (reset bool, err error) {
	size, err := replay(filepath.Join(x.dir, journalFile), x.spec.Dimension, func(r record, at int64, size uint32) {
		x.records++
		if r.op == opDelete {
			x.rows.delete(r.id)
			return
		}
		x.rows.upsert(r.id, r.vector, r.metadata, at, size)
	})
	if errors.Is(err, errCorrupt) || errors.Is(err, fs.ErrNotExist) {
		x.records = 0
		return true, nil
	}
	if err != nil {
		return false, err
	}
	x.size = size
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
	var buf bytes.Buffer
	at := make([]int64, len(vectors))
	for i, v := range vectors {
		at[i] = int64(buf.Len())
		appendRecord(&buf, record{op: opUpsert, id: v.ID, document: v.Document, metadata: v.Metadata, vector: v.Embedding})
		if n := int64(buf.Len()) - at[i] - 8; n > maxRecordSize {
			// Replay would refuse it and reset the index.
			return fmt.Errorf("upsert vectors: %w: vector %q takes %d bytes, more than %d", vectorindex.ErrInvalid, v.ID, n, maxRecordSize)
		}
	}
	base := x.size
	if err := x.appendJournal(buf.Bytes(), len(vectors)); err != nil {
		return fmt.Errorf("upsert vectors: %w", err)
	}
	x.mu.Lock()
	for i, v := range vectors {
		end := int64(buf.Len())
		if i+1 < len(at) {
			end = at[i+1]
		}
		x.rows.upsert(v.ID, v.Embedding, v.Metadata, base+at[i], uint32(end-at[i]))
	}
	x.mu.Unlock()
	return x.maybeCompact()
}

// Query returns the stored vectors most similar to q.Embedding: the rows
// the int8 scan cannot rule out, re-scored exactly from the journal.
func (x *Index) Query(ctx context.Context, q vectorindex.Query) ([]vectorindex.Hit, error) {
	hits, err := x.QueryBatch(ctx, []vectorindex.Query{q})
	if err != nil {
		return nil, err
	}
	return hits[0], nil
}

// QueryBatch answers several queries in one pass over the rows: each
// answer is the one Query gives, and a batch reads the codes from memory
// once rather than once per query (docs/decisions/0003, "Batched
// queries"). One invalid query rejects the batch.
func (x *Index) QueryBatch(ctx context.Context, qs []vectorindex.Query) ([][]vectorindex.Hit, error) {
	for _, q := range qs {
		if err := vectorindex.PrepareQuery(ctx, x.spec, q); err != nil {
			return nil, err
		}
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, fmt.Errorf("query vectors: %w", vectorindex.ErrClosed)
	}
	x.queries.Add(int64(len(qs)))
	ss := make([]search, len(qs))
	for k, q := range qs {
		var want []uint32
		if len(q.Where) > 0 {
			var ok bool
			if want, ok = x.rows.pairs.filter(q.Where); !ok {
				continue // a pair no row holds: n stays 0, no hits
			}
		}
		// float32 similarities are compared with the float64 threshold
		// after conversion; keep rows a hair below it so rounding loses
		// no hit.
		ss[k] = search{p: newProbe(normalized(q.Embedding)), n: q.Limit, floor: float64(float32(q.MinSimilarity) - 1e-6), want: want}
	}
	cands := x.rows.candidates(ss)
	out := make([][]vectorindex.Hit, len(qs))
	var buf []byte
	for k, q := range qs {
		if ss[k].n <= 0 {
			continue
		}
		found, err := x.rescore(ctx, ss[k].p.q, cands[k])
		if err != nil {
			return nil, fmt.Errorf("query vectors: %w", err)
		}
		minSim := float32(ss[k].floor)
		for _, f := range best(found, q.Limit, minSim) {
			sim := vectorindex.ClampSimilarity(float64(f.sim))
			if sim < q.MinSimilarity {
				continue
			}
			i := x.rows.pos[f.id]
			var rec record
			if rec, buf, err = x.readRow(i, buf); err != nil {
				return nil, fmt.Errorf("query vectors: %w", err)
			}
			out[k] = append(out[k], vectorindex.Hit{ID: f.id, Similarity: sim, Metadata: x.rows.pairs.metadata(x.rows.meta[i]), Document: rec.document})
		}
	}
	return out, nil
}

// rescore computes the exact float32 similarity of q (unit length) with
// each candidate row, reading their vectors from the journal; a vector
// held by several candidates (same hash, head and codes) is read and
// scored once. The caller holds mu.
func (x *Index) rescore(ctx context.Context, q []float32, cands []int32) ([]scored, error) {
	dim := x.spec.Dimension
	const block = 256
	type key struct {
		sum  uint64
		head rowHead
	}
	seen := make(map[key]int, len(cands)) // -> index in distinct
	var distinct []int32
	same := make([]int, len(cands)) // candidate -> index in distinct
	for k, i := range cands {
		kk := key{x.rows.sum[i], x.rows.head[i]}
		d, ok := seen[kk]
		if ok && !bytes.Equal(int8Bytes(x.rows.code(int(i))), int8Bytes(x.rows.code(int(distinct[d])))) {
			// A hash collision between two vectors: both are read.
			d, ok = len(distinct), false
		}
		if !ok {
			d = len(distinct)
			seen[kk] = d
			distinct = append(distinct, i)
		}
		same[k] = d
	}
	vecs := make([]float32, min(len(distinct), block)*dim)
	sims := make([]float32, len(distinct))
	var buf []byte
	for lo := 0; lo < len(distinct); lo += block {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		part := distinct[lo:min(lo+block, len(distinct))]
		for j, i := range part {
			v := vecs[j*dim : (j+1)*dim]
			var err error
			if buf, err = x.readVector(i, v, buf); err != nil {
				return nil, err
			}
			copy(v, normalized(v))
		}
		dotRows(q, vecs[:len(part)*dim], len(part), sims[lo:lo+len(part)])
	}
	out := make([]scored, len(cands))
	for k, i := range cands {
		out[k] = scored{id: x.rows.ids[i], sim: sims[same[k]]}
	}
	x.rescored.Add(int64(len(distinct)))
	return out, nil
}

// int8Bytes views codes as bytes.
func int8Bytes(c []int8) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c))), len(c))
}

// readVector reads row i's float32 vector from the journal into dst. The
// caller holds mu.
func (x *Index) readVector(i int32, dst []float32, buf []byte) ([]byte, error) {
	return readVector(x.journal, x.rows.at[i], x.rows.size[i], x.rows.ids[i], dst, buf)
}

// readRow reads row i's journal record back. A record that is not the
// row's any more is corruption, reported, never served. The caller holds
// mu.
func (x *Index) readRow(i int32, buf []byte) (record, []byte, error) {
	rec, buf, err := readRecord(x.journal, x.rows.at[i], x.rows.size[i], x.spec.Dimension, buf)
	if err == nil && (rec.op != opUpsert || rec.id != x.rows.ids[i]) {
		err = fmt.Errorf("%w: record at %d is not vector %q", errCorrupt, x.rows.at[i], x.rows.ids[i])
	}
	return rec, buf, err
}

// Embeddings returns stored embeddings, normalised, read from the journal.
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
	var buf []byte
	for k, id := range ids {
		if k%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("read embeddings: %w", err)
			}
		}
		i, ok := x.rows.pos[id]
		if !ok {
			continue
		}
		v := make([]float32, x.spec.Dimension)
		var err error
		if buf, err = x.readVector(i, v, buf); err != nil {
			return nil, fmt.Errorf("read embeddings: %w", err)
		}
		copy(v, normalized(v))
		out[id] = v
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
		_, ok := x.rows.pos[id]
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
	for _, id := range present {
		x.rows.delete(id)
	}
	x.mu.Unlock()
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
	return x.rows.len(), nil
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
	x.mu.Lock()
	if x.journal != nil {
		errs = append(errs, x.journal.Close())
		x.journal = nil
	}
	x.release()
	x.rows = nil
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
