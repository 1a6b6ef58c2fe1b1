package gitrepo

import (
	"bufio"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// packSet reads objects straight from packfiles by their index. go-git's
// storage reloads every pack index whenever it learns of a new pack, which
// makes a history of many batch commits (each its own pack) quadratic;
// packSet adds new packs one at a time and reads undeltified objects
// directly. Deltified objects (from git gc or a fetch) and loose objects
// are left to go-git. The caller holds Repo.mu.
type packSet struct {
	dir   string
	packs map[string]*packFile // by base name "pack-<sha>"
	order []*packFile          // newest first: recent objects are read most
}

type packFile struct {
	name string // "pack-<sha>"
	path string // of the .pack file
	idx  offsetFinder
	f    *os.File
}

func newPackSet(gitDir string) *packSet {
	return &packSet{dir: filepath.Join(gitDir, "objects", "pack"), packs: map[string]*packFile{}}
}

// errDelta says the object is stored as a delta: go-git must read it.
var errDelta = errors.New("object is a delta")

// refresh loads the indexes of packs that appeared and forgets packs
// that were removed (a repack). It returns whether anything changed.
func (ps *packSet) refresh() (bool, error) {
	entries, err := os.ReadDir(ps.dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("list packs: %w", err)
	}
	present := map[string]bool{}
	changed := false
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(name, "pack-") {
			continue
		}
		present[name] = true
		if ps.packs[name] != nil {
			continue
		}
		idx, err := openPackIndex(filepath.Join(ps.dir, name+".idx"))
		if errors.Is(err, os.ErrNotExist) {
			continue // being written; seen next time
		}
		if err != nil {
			return changed, err
		}
		p := &packFile{name: name, path: filepath.Join(ps.dir, name+".pack"), idx: idx}
		ps.packs[name] = p
		ps.order = append([]*packFile{p}, ps.order...)
		changed = true
	}
	kept := ps.order[:0]
	for _, p := range ps.order {
		if present[p.name] {
			kept = append(kept, p)
			continue
		}
		p.close()
		delete(ps.packs, p.name)
		changed = true
	}
	ps.order = kept
	return changed, nil
}

func loadIndex(path string) (*idxfile.MemoryIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReaderSize(f, 64<<10)).Decode(idx); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	return idx, nil
}

// add registers a pack this process just wrote, with the index it built;
// a large one is read from its file instead, unless the file cannot be
// read back.
func (ps *packSet) add(checksum Hash, mem *idxfile.MemoryIndex) {
	name := "pack-" + checksum.String()
	if ps.packs[name] != nil {
		return
	}
	var idx offsetFinder = mem
	if n, err := mem.Count(); err == nil && n > inMemoryEntries {
		if onDisk, err := openPackIndex(filepath.Join(ps.dir, name+".idx")); err == nil {
			idx = onDisk
		}
	}
	p := &packFile{name: name, path: filepath.Join(ps.dir, name+".pack"), idx: idx}
	ps.packs[name] = p
	ps.order = append([]*packFile{p}, ps.order...)
}

// read returns object h if a known pack holds it undeltified;
// plumbing.ErrObjectNotFound if no known pack holds it; errDelta if it is
// a delta.
func (ps *packSet) read(h Hash) (plumbing.EncodedObject, error) {
	for _, p := range ps.order {
		off, err := p.idx.FindOffset(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return p.readAt(off)
	}
	return nil, plumbing.ErrObjectNotFound
}

func (p *packFile) readAt(off int64) (plumbing.EncodedObject, error) {
	if p.f == nil {
		f, err := os.Open(p.path)
		if err != nil {
			return nil, err
		}
		p.f = f
	}
	br := bufio.NewReaderSize(io.NewSectionReader(p.f, off, 1<<62), 4096)
	b, err := br.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("read pack %s: %w", p.name, err)
	}
	typ := plumbing.ObjectType((b >> 4) & 7)
	size := int64(b & 0x0f)
	for shift := 4; b&0x80 != 0; shift += 7 {
		if b, err = br.ReadByte(); err != nil {
			return nil, fmt.Errorf("read pack %s: %w", p.name, err)
		}
		size |= int64(b&0x7f) << shift
	}
	switch typ {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	default:
		return nil, errDelta
	}
	zr, err := zlib.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("read pack %s: %w", p.name, err)
	}
	defer zr.Close()
	obj := &plumbing.MemoryObject{}
	obj.SetType(typ)
	obj.SetSize(size)
	buf := make([]byte, size)
	if _, err := io.ReadFull(zr, buf); err != nil {
		return nil, fmt.Errorf("read pack %s: %w", p.name, err)
	}
	obj.Write(buf)
	return obj, nil
}

func (ps *packSet) close() {
	for _, p := range ps.order {
		p.close()
	}
}

func (p *packFile) close() {
	if p.f != nil {
		p.f.Close()
	}
	if ix, ok := p.idx.(*fileIndex); ok {
		ix.close()
	}
}
