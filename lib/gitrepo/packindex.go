package gitrepo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// offsetFinder finds an object's offset in its pack, or returns
// plumbing.ErrObjectNotFound.
type offsetFinder interface {
	FindOffset(h plumbing.Hash) (int64, error)
}

// inMemoryEntries is the largest pack whose index is decoded into the
// heap whole. A larger index is read from its file: a million decisions
// make a pack of several million objects, whose decoded index took
// 148 MB of heap (docs/thresholds.md, "Repository maintenance").
const inMemoryEntries = 1 << 14

// sampleEvery is how many names of a file-backed index share one name
// kept in memory: a lookup reads at most that many names (1,280 bytes)
// with one read, then the offset with a second.
const sampleEvery = 64

// idxMagic opens every version-2 pack index.
var idxMagic = []byte{0xff, 't', 'O', 'c'}

// idxHeader is the size of a version-2 index's magic and version; the
// 256-entry fan-out table follows.
const idxHeader = 8

// fileIndex answers FindOffset from a version-2 pack index on disk,
// keeping in memory only the fan-out table and every sampleEvery-th name.
type fileIndex struct {
	f      *os.File
	count  int
	fanout [256]uint32
	sample []plumbing.Hash // names[0], names[sampleEvery], …
}

// openPackIndex returns the index of a pack: decoded whole when it is
// small, else read from its file as lookups need it.
func openPackIndex(path string) (offsetFinder, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	head := make([]byte, idxHeader+256*4)
	if _, err := io.ReadFull(f, head); err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !bytes.Equal(head[:4], idxMagic) || binary.BigEndian.Uint32(head[4:8]) != idxfile.VersionSupported {
		f.Close()
		return nil, fmt.Errorf("read %s: not a version-2 pack index", path)
	}
	count := int(binary.BigEndian.Uint32(head[idxHeader+255*4:]))
	if count <= inMemoryEntries {
		f.Close()
		return loadIndex(path)
	}
	ix := &fileIndex{f: f, count: count}
	for i := range ix.fanout {
		ix.fanout[i] = binary.BigEndian.Uint32(head[idxHeader+4*i:])
		if i > 0 && ix.fanout[i] < ix.fanout[i-1] {
			f.Close()
			return nil, fmt.Errorf("read %s: fan-out table not sorted", path)
		}
	}
	if err := ix.readSample(); err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ix, nil
}

func (ix *fileIndex) namesAt() int64 { return idxHeader + 256*4 }

// readSample reads the names once, front to back, keeping every
// sampleEvery-th.
func (ix *fileIndex) readSample() error {
	ix.sample = make([]plumbing.Hash, 0, (ix.count+sampleEvery-1)/sampleEvery)
	buf := make([]byte, 20*sampleEvery*256)
	for i := 0; i < ix.count; i += sampleEvery * 256 {
		n := min(ix.count-i, sampleEvery*256)
		if _, err := ix.f.ReadAt(buf[:20*n], ix.namesAt()+int64(20*i)); err != nil {
			return err
		}
		for j := 0; j < n; j += sampleEvery {
			var h plumbing.Hash
			copy(h[:], buf[20*j:])
			ix.sample = append(ix.sample, h)
		}
	}
	return nil
}

func (ix *fileIndex) FindOffset(h plumbing.Hash) (int64, error) {
	lo, hi := 0, int(ix.fanout[h[0]])
	if h[0] > 0 {
		lo = int(ix.fanout[h[0]-1])
	}
	if lo >= hi {
		return 0, plumbing.ErrObjectNotFound
	}
	// The last sampled name at or below h bounds the block to read.
	s := sort.Search(len(ix.sample), func(i int) bool { return bytes.Compare(ix.sample[i][:], h[:]) > 0 }) - 1
	if s < 0 {
		return 0, plumbing.ErrObjectNotFound
	}
	lo, hi = max(lo, s*sampleEvery), min(hi, (s+1)*sampleEvery)
	if lo >= hi {
		return 0, plumbing.ErrObjectNotFound
	}
	names := make([]byte, 20*(hi-lo))
	if _, err := ix.f.ReadAt(names, ix.namesAt()+int64(20*lo)); err != nil {
		return 0, err
	}
	j := sort.Search(hi-lo, func(i int) bool { return bytes.Compare(names[20*i:20*i+20], h[:]) >= 0 })
	if j == hi-lo || !bytes.Equal(names[20*j:20*j+20], h[:]) {
		return 0, plumbing.ErrObjectNotFound
	}
	return ix.offset(lo + j)
}

// offset reads entry i's offset: 31 bits in the 32-bit table, or, with
// the high bit set, an index into the 64-bit table.
func (ix *fileIndex) offset(i int) (int64, error) {
	offsets32 := ix.namesAt() + int64(24*ix.count) // names, then CRCs
	var b [8]byte
	if _, err := ix.f.ReadAt(b[:4], offsets32+int64(4*i)); err != nil {
		return 0, err
	}
	o := binary.BigEndian.Uint32(b[:4])
	if o&(1<<31) == 0 {
		return int64(o), nil
	}
	at := offsets32 + int64(4*ix.count) + 8*int64(o&^(1<<31))
	if _, err := ix.f.ReadAt(b[:], at); err != nil {
		return 0, err
	}
	off := binary.BigEndian.Uint64(b[:])
	if off > 1<<62 {
		return 0, errors.New("pack index: offset out of range")
	}
	return int64(off), nil
}

func (ix *fileIndex) close() { ix.f.Close() }
