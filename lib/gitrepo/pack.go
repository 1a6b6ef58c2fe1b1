package gitrepo

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/precept-dev/precept/lib/durable"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// writePackFiles writes objs as a version-2 packfile and its index into
// objects/pack. It records each object's offset and CRC while writing, so
// unlike a generic pack writer it never re-reads and inflates the pack to
// index it, and it compresses at zlib's fastest level: feedback batches
// are written far more often than they are read.
func writePackFiles(gitDir string, objs *objectSet, fsync bool) (Hash, *idxfile.MemoryIndex, error) {
	compressed, err := compressAll(objs)
	if err != nil {
		return ZeroHash, nil, err
	}
	b, err := newPackBuilder(gitDir, len(objs.hashes), fsync)
	if err != nil {
		return ZeroHash, nil, err
	}
	defer b.abort()
	for i, h := range objs.hashes {
		if err := b.add(h, compressed[i]); err != nil {
			return ZeroHash, nil, err
		}
	}
	return b.finish()
}

// packBuilder streams objects into a new packfile in objects/pack and
// puts it and its index in place when finished: a reader never sees a
// pack without its index.
type packBuilder struct {
	dir   string
	fsync bool
	tmp   *os.File
	pw    *packWriter
	idx   *idxfile.Writer
	count int
	added int
	done  bool
}

// newPackBuilder starts a pack of exactly count objects.
func newPackBuilder(gitDir string, count int, fsync bool) (*packBuilder, error) {
	dir := filepath.Join(gitDir, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return nil, err
	}
	b := &packBuilder{dir: dir, fsync: fsync, tmp: tmp, pw: &packWriter{sum: sha1.New()}, idx: new(idxfile.Writer), count: count}
	b.pw.w = bufio.NewWriterSize(io.MultiWriter(tmp, b.pw.sum), 256<<10)
	var head [12]byte
	copy(head[:4], "PACK")
	binary.BigEndian.PutUint32(head[4:], 2)
	binary.BigEndian.PutUint32(head[8:], uint32(count))
	if err := b.pw.write(head[:], nil); err != nil {
		b.abort()
		return nil, err
	}
	if err := b.idx.OnHeader(uint32(count)); err != nil {
		b.abort()
		return nil, err
	}
	return b, nil
}

// add appends one compressed object.
func (b *packBuilder) add(h Hash, c compressedObject) error {
	if b.added == b.count {
		return fmt.Errorf("write pack: more than the %d objects announced", b.count)
	}
	offset := b.pw.n
	crc := crc32.NewIEEE()
	if err := b.pw.write(entryHeader(c.typ, c.size), crc); err != nil {
		return err
	}
	if err := b.pw.write(c.data, crc); err != nil {
		return fmt.Errorf("write pack object: %w", err)
	}
	b.idx.Add(h, uint64(offset), crc.Sum32())
	b.added++
	return nil
}

// addRaw appends an object as a packed entry (header and compressed
// data) copied from another pack.
func (b *packBuilder) addRaw(h Hash, entry []byte) error {
	if b.added == b.count {
		return fmt.Errorf("write pack: more than the %d objects announced", b.count)
	}
	offset := b.pw.n
	crc := crc32.NewIEEE()
	if err := b.pw.write(entry, crc); err != nil {
		return fmt.Errorf("write pack object: %w", err)
	}
	b.idx.Add(h, uint64(offset), crc.Sum32())
	b.added++
	return nil
}

// abort removes the unfinished pack; after finish it does nothing.
func (b *packBuilder) abort() {
	if !b.done {
		b.done = true
		b.tmp.Close()
		os.Remove(b.tmp.Name())
	}
}

// finish writes the checksum and the index and renames both into place.
func (b *packBuilder) finish() (Hash, *idxfile.MemoryIndex, error) {
	if b.added != b.count {
		return ZeroHash, nil, fmt.Errorf("write pack: %d objects of the %d announced", b.added, b.count)
	}
	if err := b.pw.w.Flush(); err != nil {
		return ZeroHash, nil, err
	}
	var checksum Hash
	copy(checksum[:], b.pw.sum.Sum(nil))
	if _, err := b.tmp.Write(checksum[:]); err != nil {
		return ZeroHash, nil, err
	}
	if err := b.idx.OnFooter(checksum); err != nil {
		return ZeroHash, nil, err
	}
	if b.fsync {
		if err := b.tmp.Sync(); err != nil {
			return ZeroHash, nil, err
		}
	}
	if err := b.tmp.Close(); err != nil {
		return ZeroHash, nil, err
	}

	mem, err := b.idx.Index()
	if err != nil {
		return ZeroHash, nil, fmt.Errorf("build pack index: %w", err)
	}
	base := filepath.Join(b.dir, "pack-"+checksum.String())
	idxTmp, err := os.CreateTemp(b.dir, "tmp_idx_")
	if err != nil {
		return ZeroHash, nil, err
	}
	defer os.Remove(idxTmp.Name())
	if _, err := idxfile.NewEncoder(idxTmp).Encode(mem); err != nil {
		idxTmp.Close()
		return ZeroHash, nil, fmt.Errorf("write pack index: %w", err)
	}
	if b.fsync {
		if err := idxTmp.Sync(); err != nil {
			idxTmp.Close()
			return ZeroHash, nil, err
		}
	}
	if err := idxTmp.Close(); err != nil {
		return ZeroHash, nil, err
	}
	// The index goes in place first: go-git lists packs by their .pack
	// file and needs the index to be there when it does.
	for _, mv := range [][2]string{{idxTmp.Name(), base + ".idx"}, {b.tmp.Name(), base + ".pack"}} {
		os.Chmod(mv[0], 0o444)
		if err := os.Rename(mv[0], mv[1]); err != nil {
			return ZeroHash, nil, err
		}
	}
	b.done = true
	if b.fsync {
		if err := durable.SyncDir(b.dir); err != nil {
			return ZeroHash, nil, err
		}
	}
	return checksum, mem, nil
}

type compressedObject struct {
	typ  plumbing.ObjectType
	size int64
	data []byte
}

// compressAll deflates every object, on all cores: compression is most of
// the cost of writing a batch.
func compressAll(objs *objectSet) ([]compressedObject, error) {
	out := make([]compressedObject, len(objs.hashes))
	workers := min(runtime.GOMAXPROCS(0), 1+len(objs.hashes)/64)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fast, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
			// Trees are mostly SHA-1s, which do not compress: storing them
			// saves the Huffman work that dominates small objects.
			stored, _ := zlib.NewWriterLevel(io.Discard, zlib.NoCompression)
			var buf bytes.Buffer
			for i := w; i < len(objs.hashes); i += workers {
				o, err := objs.st.EncodedObject(plumbing.AnyObject, objs.hashes[i])
				if err == nil {
					zw := fast
					if o.Type() == plumbing.TreeObject {
						zw = stored
					}
					err = compressObject(zw, &buf, o)
				}
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = compressedObject{typ: o.Type(), size: o.Size(), data: bytes.Clone(buf.Bytes())}
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func compressObject(zw *zlib.Writer, buf *bytes.Buffer, o plumbing.EncodedObject) error {
	buf.Reset()
	zw.Reset(buf)
	r, err := o.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := io.Copy(zw, r); err != nil {
		return fmt.Errorf("compress object: %w", err)
	}
	return zw.Close()
}

// packWriter counts and hashes what goes into the pack.
type packWriter struct {
	w   *bufio.Writer
	sum hash.Hash
	n   int64
	err error
}

func (p *packWriter) write(b []byte, crc hash.Hash32) error {
	if p.err != nil {
		return p.err
	}
	if crc != nil {
		crc.Write(b)
	}
	_, p.err = p.w.Write(b)
	p.n += int64(len(b))
	return p.err
}

// entryHeader encodes an object's type and inflated size as git's pack
// format does: 3 type bits and 4 size bits, then 7 size bits per byte.
func entryHeader(t plumbing.ObjectType, size int64) []byte {
	c := byte(t)<<4 | byte(size&0x0f)
	size >>= 4
	var out []byte
	for size > 0 {
		out = append(out, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(out, c)
}
