package analytics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The buckets of the analytics file (docs/analytics.md, "State").
var (
	bMeta = []byte("meta")
	// bCells: cell key → the cell (encodeCell).
	bCells = []byte("cells")
	// bItems: work item → the seq of its first decision.
	bItems = []byte("items")
	// bLessons: decision id → its cell and the lesson category counted.
	bLessons = []byte("lessons")
	// bPending: decision id → its cell, for negative decisions counted
	// before the evaluator gave them a lesson.
	bPending = []byte("pending")

	keyVersion  = []byte("version")
	keyPosition = []byte("position")

	dataBuckets = [][]byte{bCells, bItems, bLessons, bPending}
)

// storeVersion changes whenever the layout or what is counted changes;
// a file of another version is rebuilt from the feed.
const storeVersion = "2"

type store struct {
	db *bolt.DB
}

// openStore opens the file; lessons says whether lesson categories are
// counted, and a file kept the other way is rebuilt (turning the
// evaluator on later must not leave the earlier decisions uncounted).
func openStore(path string, noSync, lessons bool) (*store, error) {
	version := storeVersion
	if !lessons {
		version += "-nolessons"
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open analytics: %w", err)
	}
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("open analytics %s: %w", path, err)
	}
	db.NoSync = noSync
	s := &store{db: db}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keyVersion); v != nil && string(v) != version {
			if err := clearAll(tx); err != nil {
				return err
			}
		}
		for _, b := range dataBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(keyVersion, []byte(version))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open analytics %s: %w", path, err)
	}
	return s, nil
}

// clearAll drops every figure and the position, so the feed is followed
// again from its start.
func clearAll(tx *bolt.Tx) error {
	for _, b := range dataBuckets {
		if err := tx.DeleteBucket(b); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
	}
	return tx.Bucket(bMeta).Delete(keyPosition)
}

func (s *store) reset() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := clearAll(tx); err != nil {
			return err
		}
		for _, b := range dataBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *store) close() error { return s.db.Close() }

// load calls fn with every cell and returns the position.
func (s *store) load(in *interner, fn func(cellKey, *Cell)) (uint64, error) {
	var pos uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(keyPosition); len(v) == 8 {
			pos = binary.BigEndian.Uint64(v)
		}
		return tx.Bucket(bCells).ForEach(func(k, v []byte) error {
			key, err := parseCellKey(k)
			if err != nil {
				return fmt.Errorf("%w: %v", errCorrupt, err)
			}
			c, err := decodeCell(v, in)
			if err != nil {
				return err
			}
			fn(key, c)
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("load analytics: %w", err)
	}
	return pos, nil
}

func (s *store) pendingIDs() ([]string, error) {
	var ids []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bPending).ForEach(func(k, _ []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}

func (s *store) update(fn func(*storeTx) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return fn(&storeTx{
			meta: tx.Bucket(bMeta), cells: tx.Bucket(bCells), items: tx.Bucket(bItems),
			lessons: tx.Bucket(bLessons), waiting: tx.Bucket(bPending),
		})
	})
}

// storeTx is one step's write transaction.
type storeTx struct {
	meta, cells, items, lessons, waiting *bolt.Bucket
}

// firstAttempt records a work item's first decision and reports whether
// seq is it.
func (t *storeTx) firstAttempt(item []byte, seq uint64) (bool, error) {
	if v := t.items.Get(item); v != nil {
		return len(v) == 8 && binary.BigEndian.Uint64(v) == seq, nil
	}
	return true, t.items.Put(item, seqBytes(seq))
}

func (t *storeTx) putCell(k cellKey, c *Cell, names []string) error {
	return t.cells.Put(k.bytes(), encodeCell(c, names))
}

func (t *storeTx) setPosition(pos uint64) error { return t.meta.Put(keyPosition, seqBytes(pos)) }

// A lesson record is the cell key's length (2 bytes), the cell key and
// the category.
func (t *storeTx) putLesson(id string, k cellKey, category string) error {
	kb := k.bytes()
	v := make([]byte, 2, 2+len(kb)+len(category))
	binary.BigEndian.PutUint16(v, uint16(len(kb)))
	v = append(append(v, kb...), category...)
	return t.lessons.Put([]byte(id), v)
}

func (t *storeTx) lesson(id string) (cellKey, string, bool, error) {
	v := t.lessons.Get([]byte(id))
	if v == nil {
		return cellKey{}, "", false, nil
	}
	if len(v) < 2 || int(binary.BigEndian.Uint16(v))+2 > len(v) {
		return cellKey{}, "", false, fmt.Errorf("%w: lesson of %s", errCorrupt, id)
	}
	n := int(binary.BigEndian.Uint16(v))
	k, err := parseCellKey(v[2 : 2+n])
	if err != nil {
		return cellKey{}, "", false, fmt.Errorf("%w: lesson of %s: %v", errCorrupt, id, err)
	}
	return k, string(v[2+n:]), true, nil
}

func (t *storeTx) putPending(id string, k cellKey) error { return t.waiting.Put([]byte(id), k.bytes()) }

func (t *storeTx) pending(id string) (cellKey, bool, error) {
	v := t.waiting.Get([]byte(id))
	if v == nil {
		return cellKey{}, false, nil
	}
	k, err := parseCellKey(v)
	if err != nil {
		return cellKey{}, false, fmt.Errorf("%w: pending %s: %v", errCorrupt, id, err)
	}
	return k, true, nil
}

func (t *storeTx) deletePending(id string) error { return t.waiting.Delete([]byte(id)) }
