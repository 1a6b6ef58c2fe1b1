package gitrepo

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ObjectStats counts the files the object store is made of.
type ObjectStats struct {
	// Packs is the number of packfiles.
	Packs int
	// Loose is the number of loose objects.
	Loose int
	// DebrisRemoved and DebrisBytesRemoved count the temporary files
	// of killed writes removed since Open, and their size.
	DebrisRemoved      uint64
	DebrisBytesRemoved uint64
	// Writes counts the commits and pushes since Open by outcome.
	Writes WriteStats
}

// Stats counts the repository's packfiles and loose objects. When the
// object store cannot be read it returns the error with the counts kept
// in memory (debris removed, writes) filled and Packs and Loose zero.
func (r *Repo) Stats() (ObjectStats, error) {
	st := ObjectStats{DebrisRemoved: r.debris.files.Load(), DebrisBytesRemoved: r.debris.bytes.Load(), Writes: r.writes.stats()}
	inv, err := newMaintenance(r).inventory()
	if err != nil {
		return st, err
	}
	st.Packs, st.Loose = len(inv.packs), len(inv.loose)
	return st, nil
}

// maintainChunk is how many objects Maintain reads per hold of the
// repository lock: writers wait for at most one chunk.
const maintainChunk = 256

// testHookChunk, when set by a test, runs between chunks with the
// repository lock released.
var testHookChunk func()

// Maintain bounds the number of files the object store is made of
// (docs/thresholds.md, "Repository maintenance"): when there are more than
// MaxPacks packfiles or MaxLoose loose objects, it writes the loose
// objects and the smaller packs into one new pack and then deletes what
// it copied. Which packs are rolled up follows a geometric rule — each
// pack left alone is at least twice the size of everything rolled up —
// so the large old packs are rarely rewritten and the pack count stays
// logarithmic in the repository's size.
//
// Whole objects are copied from pack to pack byte for byte, without the
// repository lock; loose objects and deltas are read under it a chunk at
// a time, so commits go on while Maintain runs; it never drops an object, so it
// needs no reachability walk and cannot race a commit whose objects are
// written but whose ref has not moved yet. It returns whether it rewrote
// anything. Concurrent calls run one at a time.
func (r *Repo) Maintain() (bool, error) {
	r.maint.Lock()
	defer r.maint.Unlock()
	m := newMaintenance(r)
	if err := m.removeDebris(); err != nil {
		return false, err
	}
	inv, err := m.inventory()
	if err != nil {
		return false, err
	}
	if len(inv.packs) <= r.opts.MaxPacks && len(inv.loose) <= r.opts.MaxLoose {
		return false, nil
	}
	packs := inv.rollup(r.opts.MaxPacks)
	if len(packs)+len(inv.loose) < 2 {
		return false, nil
	}
	entries, loose, err := m.plan(packs, inv.loose)
	if err != nil {
		return false, err
	}
	if err := m.copyIntoPack(packs, entries, loose); err != nil {
		return false, fmt.Errorf("maintain: %w", err)
	}
	return true, m.removeCopied(packs, inv.loose)
}

// maintenance is what Maintain's steps touch: the repository's folder
// and, under the repository lock mu, its storage, its set of packs and
// its object reads.
type maintenance struct {
	path   string
	mu     *sync.Mutex
	st     *filesystem.Storage
	packs  *packSet
	object func(plumbing.ObjectType, Hash) (plumbing.EncodedObject, error)
	// Removing debris: the clock, the age that makes a temporary file
	// debris, and the count of what was removed.
	now       func() time.Time
	debrisAge time.Duration
	debris    *debrisCount
}

func newMaintenance(r *Repo) maintenance {
	return maintenance{path: r.path, mu: &r.mu, st: r.st, packs: r.packs, object: r.object,
		now: r.opts.Now, debrisAge: r.opts.DebrisAge, debris: &r.debris}
}

// inventory lists the complete packfiles (pack and index present, not
// marked .keep) and the loose objects. Neither listing needs the lock:
// packs and loose objects are immutable once named.
type inventory struct {
	packs      []packInfo
	loose      []Hash
	looseBytes int64
}

type packInfo struct {
	name string // "pack-<sha>"
	size int64  // of the .pack file
}

func (m maintenance) inventory() (inventory, error) {
	r := m
	var inv inventory
	objects := filepath.Join(r.path, "objects")
	entries, err := os.ReadDir(filepath.Join(objects, "pack"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return inv, fmt.Errorf("list packs: %w", err)
	}
	files := map[string]bool{}
	for _, e := range entries {
		files[e.Name()] = true
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(name, "pack-") || !files[name+".idx"] || files[name+".keep"] {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return inv, fmt.Errorf("list packs: %w", err)
		}
		inv.packs = append(inv.packs, packInfo{name: name, size: info.Size()})
	}
	dirs, err := os.ReadDir(objects)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return inv, fmt.Errorf("list loose objects: %w", err)
	}
	for _, d := range dirs {
		if len(d.Name()) != 2 || !d.IsDir() || !isHex(d.Name()) {
			continue
		}
		names, err := os.ReadDir(filepath.Join(objects, d.Name()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return inv, fmt.Errorf("list loose objects: %w", err)
		}
		for _, n := range names {
			if len(n.Name()) != 38 || !isHex(n.Name()) {
				continue // a temporary file being written
			}
			inv.loose = append(inv.loose, plumbing.NewHash(d.Name()+n.Name()))
			if info, err := n.Info(); err == nil {
				inv.looseBytes += info.Size()
			}
		}
	}
	return inv, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// rollup picks the packs to merge: smallest first, taking the next pack
// while it is smaller than twice what is taken so far (the loose objects
// count by their bytes), and at least two packs when there are more than
// maxPacks, so a round always brings the count down.
func (inv inventory) rollup(maxPacks int) []packInfo {
	packs := slices.Clone(inv.packs)
	slices.SortFunc(packs, func(a, b packInfo) int { return cmp.Compare(a.size, b.size) })
	taken := inv.looseBytes
	least := 0
	if len(packs) > maxPacks {
		least = 2
	}
	n := 0
	for n < len(packs) && (n < least || packs[n].size < 2*taken) {
		taken += packs[n].size
		n++
	}
	return packs[:n]
}

// packEntry is one object of a pack to roll up, located by its index.
type packEntry struct {
	hash       Hash
	offset     int64
	end        int64 // where the next entry (or the trailing checksum) starts
	crc        uint32
	packOffset int // which pack, in the rollup's order
}

// plan lists, without duplicates, the objects of the given packs (in
// pack order, so each pack is read front to back) and the loose objects
// no pack among them holds.
func (m maintenance) plan(packs []packInfo, loose []Hash) ([]packEntry, []Hash, error) {
	r := m
	seen := map[Hash]bool{}
	var entries []packEntry
	for i, p := range packs {
		idx, err := loadIndex(filepath.Join(r.path, "objects", "pack", p.name+".idx"))
		if err != nil {
			return nil, nil, err
		}
		it, err := idx.EntriesByOffset()
		if err != nil {
			return nil, nil, fmt.Errorf("read %s.idx: %w", p.name, err)
		}
		var inPack []packEntry
		for {
			e, err := it.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				it.Close()
				return nil, nil, fmt.Errorf("read %s.idx: %w", p.name, err)
			}
			inPack = append(inPack, packEntry{hash: e.Hash, offset: int64(e.Offset), packOffset: i, crc: e.CRC32})
		}
		it.Close()
		for j := range inPack {
			inPack[j].end = p.size - int64(len(Hash{}))
			if j+1 < len(inPack) {
				inPack[j].end = inPack[j+1].offset
			}
			if inPack[j].end <= inPack[j].offset || inPack[j].end > p.size {
				return nil, nil, fmt.Errorf("%s.idx: object %s at %d is outside the pack", p.name, inPack[j].hash, inPack[j].offset)
			}
			if !seen[inPack[j].hash] {
				seen[inPack[j].hash] = true
				entries = append(entries, inPack[j])
			}
		}
	}
	var rest []Hash
	for _, h := range loose {
		if !seen[h] {
			seen[h] = true
			rest = append(rest, h)
		}
	}
	return entries, rest, nil
}

// copyIntoPack writes the packs' objects and the loose objects into one
// new pack. Whole objects in a pack are copied byte for byte, without the
// lock: a named pack never changes. Deltas (from a fetch or git gc) and
// loose objects are read through the repository, a chunk at a time under
// the lock, and compressed outside it.
func (m maintenance) copyIntoPack(packs []packInfo, entries []packEntry, loose []Hash) error {
	r := m
	// Always synced, whatever NoFsync says: the files it replaces are
	// deleted once it is written.
	b, err := newPackBuilder(r.path, len(entries)+len(loose), true)
	if err != nil {
		return err
	}
	defer b.abort()
	var deltas []Hash
	files := make([]*os.File, len(packs))
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	var raw []byte
	for _, e := range entries {
		f := files[e.packOffset]
		if f == nil {
			if f, err = os.Open(filepath.Join(r.path, "objects", "pack", packs[e.packOffset].name+".pack")); err != nil {
				return err
			}
			files[e.packOffset] = f
		}
		raw = slices.Grow(raw[:0], int(e.end-e.offset))[:e.end-e.offset]
		if _, err := f.ReadAt(raw, e.offset); err != nil {
			return fmt.Errorf("read %s: %w", packs[e.packOffset].name, err)
		}
		if crc32.ChecksumIEEE(raw) != e.crc {
			// Never let the only remaining copy be a damaged one.
			return fmt.Errorf("%s: object %s does not match its index's checksum; run git fsck", packs[e.packOffset].name, e.hash)
		}
		switch plumbing.ObjectType((raw[0] >> 4) & 7) {
		case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
			if err := b.addRaw(e.hash, raw); err != nil {
				return err
			}
		default:
			deltas = append(deltas, e.hash)
		}
	}
	if err := m.recompress(b, append(deltas, loose...)); err != nil {
		return err
	}
	checksum, idx, err := b.finish()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.packs.add(checksum, idx)
	r.mu.Unlock()
	return nil
}

// recompress adds objects read whole through the repository.
func (m maintenance) recompress(b *packBuilder, hashes []Hash) error {
	fast, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	stored, _ := zlib.NewWriterLevel(io.Discard, zlib.NoCompression)
	var buf bytes.Buffer
	for start := 0; start < len(hashes); start += maintainChunk {
		chunk := hashes[start:min(len(hashes), start+maintainChunk)]
		objs, err := m.readObjects(chunk)
		if err != nil {
			return err
		}
		if testHookChunk != nil {
			testHookChunk()
		}
		for i, o := range objs {
			zw := fast
			if o.Type() == plumbing.TreeObject {
				zw = stored
			}
			if err := compressObject(zw, &buf, o); err != nil {
				return err
			}
			if err := b.add(chunk[i], compressedObject{typ: o.Type(), size: o.Size(), data: buf.Bytes()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// readObjects reads whole objects under the lock.
func (m maintenance) readObjects(hashes []Hash) ([]plumbing.EncodedObject, error) {
	r := m
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]plumbing.EncodedObject, len(hashes))
	for i, h := range hashes {
		o, err := r.object(plumbing.AnyObject, h)
		if err != nil {
			return nil, err
		}
		if _, ok := o.(*plumbing.MemoryObject); !ok {
			// go-git's objects read their file lazily: copy now, under the lock.
			m := &plumbing.MemoryObject{}
			m.SetType(o.Type())
			rd, err := o.Reader()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", h, err)
			}
			_, err = io.Copy(m, rd)
			rd.Close()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", h, err)
			}
			o = m
		}
		out[i] = o
	}
	return out, nil
}

// removeCopied deletes the packs and loose objects now held by the new
// pack, under the lock so no read is in flight, and lets go-git and the
// pack set forget them.
func (m maintenance) removeCopied(packs []packInfo, loose []Hash) error {
	r := m
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	dir := filepath.Join(r.path, "objects", "pack")
	for _, p := range packs {
		// The .pack goes first: go-git lists packs by it.
		for _, ext := range []string{".pack", ".idx", ".rev", ".bitmap", ".mtimes"} {
			if err := os.Remove(filepath.Join(dir, p.name+ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	for _, h := range loose {
		s := h.String()
		if err := os.Remove(filepath.Join(r.path, "objects", s[:2], s[2:])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	r.st.Reindex()
	if _, err := r.packs.refresh(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("maintain: remove copied objects: %w", err)
	}
	return nil
}

// probeSize is what CheckWritable writes: about one small commit.
const probeSize = 8 << 10

// CheckWritable reports whether the repository's file system accepts a
// write the size of a small commit, by writing and removing a temporary
// file beside the objects.
func (r *Repo) CheckWritable() error {
	f, err := os.CreateTemp(filepath.Join(r.path, "objects"), "tmp_probe_")
	if err != nil {
		return fmt.Errorf("repository %s is not writable: %w", r.path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, probeSize))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("repository %s is not writable: %w", r.path, err)
	}
	return nil
}
