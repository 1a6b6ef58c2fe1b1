package analytics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/precept-dev/precept/lib/boltopt"
	"github.com/precept-dev/precept/lib/mapbound"
)

// The buckets of the analytics file (docs/analytics.md, "State").
var (
	bMeta = []byte("meta")
	// bCells: cell key → the cell (encodeCell).
	bCells = []byte("cells")
	// bItems: work item → the seq of its first decision.
	bItems = []byte("items")
	// bFacts: decision id → its cell, its arrival and the evaluator's
	// facts counted (encodeFacts).
	bFacts = []byte("facts")
	// bPending: decision id → its arrival and cell, for negative
	// decisions counted before the evaluator evaluated them.
	bPending = []byte("pending")

	keyVersion  = []byte("version")
	keyPosition = []byte("position")

	dataBuckets = [][]byte{bCells, bItems, bFacts, bPending}
	// retiredBuckets are the data buckets of earlier layouts, dropped
	// with the rest when a file of another version is rebuilt: "lessons"
	// (version 2) kept one record per negative decision.
	retiredBuckets = [][]byte{[]byte("lessons")}
)

// storeVersion changes whenever the layout or what is counted changes;
// a file of another version is rebuilt from the feed.
// Version 4: the evaluator's reports replace a decision's facts, so a
// file of version 3 may still count decisions found clear again.
const storeVersion = "4"

type store struct {
	db *bolt.DB
	// untrack ends mapbound's hold on db's map.
	untrack func()
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
	db, err := bolt.Open(path, 0o644, boltopt.Options())
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
	s.untrack = mapbound.Track(db)
	return s, nil
}

// clearAll drops every figure, the buckets of earlier layouts and the
// position, so the feed is followed again from its start.
func clearAll(tx *bolt.Tx) error {
	for _, b := range slices.Concat(dataBuckets, retiredBuckets) {
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

func (s *store) close() error {
	s.untrack()
	return s.db.Close()
}

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
			facts: tx.Bucket(bFacts), waiting: tx.Bucket(bPending),
		})
	})
}

// storeTx is one step's write transaction.
type storeTx struct {
	meta, cells, items, facts, waiting *bolt.Bucket
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

func (t *storeTx) putFacts(id string, k cellKey, f countedFacts) error {
	return t.facts.Put([]byte(id), encodeFacts(k, f))
}

// counted returns the facts counted for a decision, ok false when none
// were.
func (t *storeTx) counted(id string) (cellKey, countedFacts, bool, error) {
	v := t.facts.Get([]byte(id))
	if v == nil {
		return cellKey{}, countedFacts{}, false, nil
	}
	k, f, err := decodeFacts(v)
	if err != nil {
		return cellKey{}, countedFacts{}, false, fmt.Errorf("facts of %s: %w", id, err)
	}
	return k, f, true, nil
}

func (t *storeTx) putPending(id string, k cellKey, arrived time.Time) error {
	return t.waiting.Put([]byte(id), encodePending(k, arrived))
}

func (t *storeTx) pending(id string) (cellKey, time.Time, bool, error) {
	v := t.waiting.Get([]byte(id))
	if v == nil {
		return cellKey{}, time.Time{}, false, nil
	}
	k, arrived, err := decodePending(v)
	if err != nil {
		return cellKey{}, time.Time{}, false, fmt.Errorf("pending %s: %w", id, err)
	}
	return k, arrived, true, nil
}

func (t *storeTx) deletePending(id string) error { return t.waiting.Delete([]byte(id)) }
