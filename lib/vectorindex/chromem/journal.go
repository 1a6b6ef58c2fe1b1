package chromem

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
)

// The journal is the index's only durable state besides spec.json: an
// append-only file of upsert and delete records, replayed into the
// in-memory rows on open and rewritten with only the live vectors when it
// holds more dead records than live ones. It is also where the float32
// vectors and the documents live: a row in memory keeps the offset and
// length of its record, and queries read records back (readRecord) for
// the exact re-score, the hits' documents and Embeddings.
//
// Layout: journalMagic, then records of
//
//	uint32 little-endian payload length
//	uint32 little-endian CRC-32C of the payload
//	payload: op byte, then for opUpsert
//	    uvarint-prefixed ID, uvarint-prefixed document,
//	    uvarint metadata count, that many uvarint-prefixed key and value,
//	    dimension × float32 little-endian
//	  and for opDelete a uvarint-prefixed ID.
const journalMagic = "precept vectorindex journal v1\n"

const (
	opUpsert byte = 1
	opDelete byte = 2
)

// maxRecordSize bounds a record's payload; a length beyond it is corrupt.
const maxRecordSize = 64 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt reports a journal that cannot be replayed; Open resets the
// index then, so the caller re-indexes from the durable store.
var errCorrupt = errors.New("journal is corrupt")

type record struct {
	op       byte
	id       string
	document string
	metadata map[string]string
	vector   []float32
}

// appendRecord appends r's framed encoding to buf.
func appendRecord(buf *bytes.Buffer, r record) {
	var p []byte
	p = append(p, r.op)
	p = appendString(p, r.id)
	if r.op == opUpsert {
		p = appendString(p, r.document)
		p = binary.AppendUvarint(p, uint64(len(r.metadata)))
		keys := make([]string, 0, len(r.metadata))
		for k := range r.metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p = appendString(p, k)
			p = appendString(p, r.metadata[k])
		}
		for _, x := range r.vector {
			p = binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
		}
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(hdr[4:8], crc32.Checksum(p, crcTable))
	buf.Write(hdr[:])
	buf.Write(p)
}

func appendString(p []byte, s string) []byte {
	p = binary.AppendUvarint(p, uint64(len(s)))
	return append(p, s...)
}

// replay reads the journal at path and calls apply for each record with
// its offset and length, header included. It returns the offset after the last complete record: a torn final record,
// left by a crash during an append that never returned, ends the replay
// there. A damaged record before the end is errCorrupt.
func replay(path string, dim int, apply func(r record, at int64, size uint32)) (validSize int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat journal: %w", err)
	}
	size := info.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	magic := make([]byte, len(journalMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != journalMagic {
		return 0, fmt.Errorf("%w: bad header", errCorrupt)
	}
	off := int64(len(journalMagic))
	var hdr [8]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return off, nil
			}
			return 0, fmt.Errorf("read journal: %w", err)
		}
		n := int64(binary.LittleEndian.Uint32(hdr[0:4]))
		end := off + 8 + n
		if end > size {
			return off, nil
		}
		if n == 0 {
			// No record is empty: zeros, which a crash after the file
			// grew but before its data reached the disk can leave.
			if allZero(f, off, size) {
				return off, nil
			}
			return 0, fmt.Errorf("%w: empty record at %d", errCorrupt, off)
		}
		if n > maxRecordSize {
			return 0, fmt.Errorf("%w: record at %d claims %d bytes", errCorrupt, off, n)
		}
		payload = slices.Grow(payload[:0], int(n))[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return 0, fmt.Errorf("read journal: %w", err)
		}
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(hdr[4:8]) {
			if end == size {
				return off, nil
			}
			return 0, fmt.Errorf("%w: checksum mismatch at %d", errCorrupt, off)
		}
		rec, err := decodeRecord(payload, dim)
		if err != nil {
			return 0, fmt.Errorf("%w: record at %d: %v", errCorrupt, off, err)
		}
		apply(rec, off, uint32(8+n))
		off = end
	}
}

// allZero reports whether the file holds only zero bytes from off to size.
func allZero(f *os.File, off, size int64) bool {
	buf := make([]byte, 64<<10)
	for off < size {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		for _, b := range buf[:n] {
			if b != 0 {
				return false
			}
		}
		if err != nil && n == 0 {
			return false
		}
		off += int64(n)
	}
	return true
}

// readRecord reads back the record of size bytes at offset at, checking
// its checksum: the file on disk is input like any other.
func readRecord(f *os.File, at int64, size uint32, dim int, buf []byte) (record, []byte, error) {
	buf = slices.Grow(buf[:0], int(size))[:size]
	if _, err := f.ReadAt(buf, at); err != nil {
		return record{}, buf, fmt.Errorf("read journal record at %d: %w", at, err)
	}
	n := binary.LittleEndian.Uint32(buf[0:4])
	if size < 8 || n != size-8 || crc32.Checksum(buf[8:], crcTable) != binary.LittleEndian.Uint32(buf[4:8]) {
		return record{}, buf, fmt.Errorf("%w: record at %d changed on disk", errCorrupt, at)
	}
	rec, err := decodeRecord(buf[8:], dim)
	if err != nil {
		return record{}, buf, fmt.Errorf("%w: record at %d: %v", errCorrupt, at, err)
	}
	return rec, buf, nil
}

// readVector reads back only the vector of the upsert record of size
// bytes at offset at into dst (dim floats), after checking the record's
// checksum and that it is id's: re-scoring and Embeddings need neither
// the document nor the metadata, and decoding them would allocate.
func readVector(f *os.File, at int64, size uint32, id string, dst []float32, buf []byte) ([]byte, error) {
	dim := len(dst)
	buf = slices.Grow(buf[:0], int(size))[:size]
	if _, err := f.ReadAt(buf, at); err != nil {
		return buf, fmt.Errorf("read journal record at %d: %w", at, err)
	}
	bad := func(why string) error { return fmt.Errorf("%w: record at %d %s", errCorrupt, at, why) }
	if size < 8 || binary.LittleEndian.Uint32(buf[0:4]) != size-8 || crc32.Checksum(buf[8:], crcTable) != binary.LittleEndian.Uint32(buf[4:8]) {
		return buf, bad("changed on disk")
	}
	d := decoder{p: buf[8:]}
	op, got := d.byte(), d.string()
	if d.err != nil || op != opUpsert || got != id || len(d.p) < 4*dim {
		return buf, bad(fmt.Sprintf("is not vector %q", id))
	}
	tail := d.p[len(d.p)-4*dim:]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(tail[4*i:]))
	}
	return buf, nil
}

func decodeRecord(p []byte, dim int) (record, error) {
	d := decoder{p: p}
	rec := record{op: d.byte()}
	rec.id = d.string()
	switch rec.op {
	case opDelete:
	case opUpsert:
		rec.document = d.string()
		n := d.uvarint()
		if n > uint64(len(d.p)) {
			return record{}, errors.New("metadata count exceeds record")
		}
		if n > 0 {
			rec.metadata = make(map[string]string, n)
		}
		for range n {
			k := d.string()
			rec.metadata[k] = d.string()
		}
		if d.err == nil && len(d.p) != 4*dim {
			return record{}, fmt.Errorf("vector has %d bytes, want %d", len(d.p), 4*dim)
		}
		if d.err == nil {
			rec.vector = make([]float32, dim)
			for i := range rec.vector {
				x := math.Float32frombits(binary.LittleEndian.Uint32(d.p[4*i:]))
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return record{}, fmt.Errorf("vector component %d is %v", i, x)
				}
				rec.vector[i] = x
			}
			d.p = nil
		}
	default:
		return record{}, fmt.Errorf("unknown op %d", rec.op)
	}
	if d.err != nil {
		return record{}, d.err
	}
	if len(d.p) != 0 {
		return record{}, errors.New("trailing bytes")
	}
	if rec.id == "" {
		return record{}, errors.New("empty ID")
	}
	return rec, nil
}

// decoder reads a payload, remembering the first error so callers check
// once.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.p) == 0 {
		d.err = io.ErrUnexpectedEOF
		return 0
	}
	b := d.p[0]
	d.p = d.p[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.err = errors.New("bad length")
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.p)) {
		d.err = io.ErrUnexpectedEOF
		return ""
	}
	s := string(d.p[:n])
	d.p = d.p[n:]
	return s
}
