package analytics

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// interner numbers label and score names for the cells in memory, so a
// query adds distributions up in dense slices. Ids live only in this
// process; the file stores names.
type interner struct {
	// mu is taken to add a name; only a step adds names, so a step reads
	// ids without it. Queries read names under the Aggregate's lock,
	// which mu is.
	mu    sync.Locker
	ids   map[string]uint32
	names []string
}

func newInterner(mu sync.Locker) *interner { return &interner{mu: mu, ids: map[string]uint32{}} }

// MaxLabels bounds the distinct tag, category and quality-score names
// analytics keeps; later names count as OtherLabel. Producers choose
// tags, and every query's accumulators are sized by the names known, so
// without a bound a stream of one-off tags would make each request
// allocate without limit (docs/analytics.md, "Cost").
const MaxLabels = 2000

// OtherLabel stands for the names past MaxLabels; no tag can be written
// so.
const OtherLabel = "(other)"

func (in *interner) id(name string) uint32 {
	if id, ok := in.ids[name]; ok {
		return id
	}
	if len(in.names) >= MaxLabels && name != OtherLabel {
		return in.id(OtherLabel)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	id := uint32(len(in.names))
	in.ids[name] = id
	in.names = append(in.names, name)
	return id
}

// The file stores a cell as uvarints: the nine counts and sums, the
// histogram's bins, then each distribution and the scores by name, then
// the unclear-feedback figures (appendUnclear)
// (docs/analytics.md, "State"). Compact and cheap to write: a step writes
// every cell it touched.
func encodeCell(c *Cell, names []string) []byte {
	b := make([]byte, 0, 64+8*len(c.Durations)+16*(len(c.Tags)+len(c.ErrorCats)+len(c.Lessons)+len(c.Quality)))
	for _, v := range []int64{c.Approved, c.Rejected, c.ApprovedWithChanges, c.FirstAttempts, c.FirstPassAccepted,
		c.EditPercent.N, c.EditPercent.Total, c.LinesChanged.N, c.LinesChanged.Total} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(len(c.Durations)))
	for _, bin := range c.Durations {
		b = binary.AppendUvarint(b, uint64(bin.B))
		b = binary.AppendUvarint(b, uint64(bin.N))
	}
	for _, ls := range []Labels{c.Tags, c.ErrorCats, c.Lessons} {
		b = binary.AppendUvarint(b, uint64(len(ls)))
		for _, l := range ls {
			b = appendString(b, names[l.ID])
			b = binary.AppendUvarint(b, uint64(l.N))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(c.Quality)))
	for _, q := range c.Quality {
		b = appendString(b, names[q.ID])
		b = binary.AppendUvarint(b, uint64(q.N))
		b = binary.AppendUvarint(b, uint64(q.Total))
	}
	return appendUnclear(b, c, names)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads what encodeCell wrote; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: truncated cell", errCorrupt)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 { return int64(d.uint()) }

func (d *decoder) string() string {
	n := d.uint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: truncated cell", errCorrupt)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads a length, bounded by what is left.
func (d *decoder) count() int {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: cell length %d", errCorrupt, n)
		return 0
	}
	return int(n)
}

func decodeCell(b []byte, in *interner) (*Cell, error) {
	d := &decoder{b: b}
	c := &Cell{}
	for _, p := range []*int64{&c.Approved, &c.Rejected, &c.ApprovedWithChanges, &c.FirstAttempts, &c.FirstPassAccepted,
		&c.EditPercent.N, &c.EditPercent.Total, &c.LinesChanged.N, &c.LinesChanged.Total} {
		*p = d.int()
	}
	for range d.count() {
		bin := d.uint()
		if bin >= numBins {
			return nil, fmt.Errorf("%w: bin %d", errCorrupt, bin)
		}
		c.Durations = c.Durations.add(int(bin), d.int())
	}
	for _, ls := range []*Labels{&c.Tags, &c.ErrorCats, &c.Lessons} {
		for range d.count() {
			name := d.string()
			*ls = ls.add(in.id(name), d.int())
		}
	}
	for range d.count() {
		name := d.string()
		c.addScore(in.id(name), Sum{N: d.int(), Total: d.int()})
	}
	readUnclear(d, c, in)
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d bytes after the cell", errCorrupt, len(d.b))
	}
	return c, d.err
}

// appendUnclear writes the unclear-feedback figures: the four counts, the
// promotion histogram's bins, then the rubric attributes seen and met by
// name.
func appendUnclear(b []byte, c *Cell, names []string) []byte {
	for _, v := range []int64{c.Unclear, c.UnclearResolved, c.UnclearNeedsReview, c.Scored} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(len(c.Promotions)))
	for _, bin := range c.Promotions {
		b = binary.AppendUvarint(b, uint64(bin.B))
		b = binary.AppendUvarint(b, uint64(bin.N))
	}
	for _, ls := range []Labels{c.RubricSeen, c.RubricMet} {
		b = binary.AppendUvarint(b, uint64(len(ls)))
		for _, l := range ls {
			b = appendString(b, names[l.ID])
			b = binary.AppendUvarint(b, uint64(l.N))
		}
	}
	return b
}

func readUnclear(d *decoder, c *Cell, in *interner) {
	for _, p := range []*int64{&c.Unclear, &c.UnclearResolved, &c.UnclearNeedsReview, &c.Scored} {
		*p = d.int()
	}
	for range d.count() {
		bin := d.uint()
		if bin >= numBins {
			d.err = fmt.Errorf("%w: bin %d", errCorrupt, bin)
			return
		}
		c.Promotions = c.Promotions.add(int(bin), d.int())
	}
	for _, ls := range []*Labels{&c.RubricSeen, &c.RubricMet} {
		for range d.count() {
			name := d.string()
			*ls = ls.add(in.id(name), d.int())
		}
	}
}
