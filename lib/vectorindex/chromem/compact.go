package chromem

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/precept-dev/precept/lib/durable"
)

// Compaction rewrites the journal with only the live records once dead
// ones (replaced or deleted vectors) outnumber them.

// shouldCompact reports whether dead records outnumber live ones by
// enough to rewrite the journal. Called with writeMu held or before the
// index is shared.
func (x *Index) shouldCompact() bool {
	live := x.rows.len()
	dead := x.records - live
	return dead >= compactMinDead && dead > live
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

// compact rewrites the journal with the record of each live vector, in
// ID order, next to the old one, and renames it into place. Queries go on
// meanwhile, reading the old file until the rows are moved to the new one.
// Called with writeMu held, so no row changes meanwhile.
func (x *Index) compact() error {
	x.mu.RLock()
	ids := slices.Sorted(maps.Keys(x.rows.pos))
	x.mu.RUnlock()
	tmp := filepath.Join(x.dir, journalFile+".tmp")
	at, size, err := x.writeSnapshot(tmp, ids)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	path := filepath.Join(x.dir, journalFile)
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		return err
	}
	if err := durable.SyncDir(x.dir); err != nil {
		// The rename may not be durable, but the handle is the file now
		// at path either way.
		x.writeErr = fmt.Errorf("sync compacted journal's directory: %w", err)
	}
	x.mu.Lock()
	old := x.journal
	x.journal = f
	for k, id := range ids {
		x.rows.at[x.rows.pos[id]] = at[k]
	}
	x.mu.Unlock()
	if old != nil {
		old.Close()
	}
	x.size = size
	x.records = len(ids)
	return x.writeErr
}

// writeSnapshot copies the journal record of each of ids, checked, to a
// new journal at path and returns where each landed and the file's size.
func (x *Index) writeSnapshot(path string, ids []string) ([]int64, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	n, _ := w.WriteString(journalMagic)
	size := int64(n)
	at := make([]int64, len(ids))
	var buf []byte
	for k, id := range ids {
		x.mu.RLock()
		i := x.rows.pos[id]
		_, buf, err = x.readRow(i, buf)
		x.mu.RUnlock()
		if err != nil {
			return nil, 0, fmt.Errorf("copy vector %q: %w", id, err)
		}
		if _, err := w.Write(buf); err != nil {
			return nil, 0, err
		}
		at[k] = size
		size += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		return nil, 0, err
	}
	if err := f.Sync(); err != nil {
		return nil, 0, err
	}
	return at, size, f.Close()
}
