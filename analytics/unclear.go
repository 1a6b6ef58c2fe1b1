package analytics

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// What the evaluator says about a decision, as analytics counts it: the
// lesson category, the clarity rubric's attributes and, for unclear
// feedback, where its clarification stands (docs/analytics.md, "Unclear
// feedback").

// Review is where the clarification of an unclear decision stands.
type Review uint8

// The review states; the zero value is a decision that was never unclear.
const (
	NotUnclear Review = iota
	// Clarifying: questions are being asked, the decision is neither
	// resolved nor left for human review.
	Clarifying
	// Resolved: a reply made the feedback clear and the decision was
	// evaluated again (promoted).
	Resolved
	// NeedsHumanReview: the questions ran out; a curator must look.
	NeedsHumanReview
)

// Attribute is one attribute of the clarity rubric and whether an
// evaluation found it.
type Attribute struct {
	Name string
	Met  bool
}

// Facts are what the evaluator recorded about a decision that analytics
// counts.
type Facts struct {
	// Category is the lesson category; empty: none (yet).
	Category string
	// Rubric is the clarity rubric as the decision's evaluation applied
	// it; nil when it carries none.
	Rubric []Attribute
	// Review is where the clarification stands; ResolvedAt is when the
	// reply that resolved it was recorded (Review Resolved).
	Review     Review
	ResolvedAt time.Time
}

// merge returns f updated with an evaluator report, which carries the
// decision's whole current state: its review always, its category and
// rubric when it reports an evaluation. Replacing rather than adding is
// what lets a decision move back to not unclear.
func (f Facts) merge(ev Evaluated) Facts {
	if ev.Evaluation {
		f.Category, f.Rubric = ev.Category, ev.Rubric
	}
	f.Review, f.ResolvedAt = ev.Review, ev.ResolvedAt
	return f
}

// same reports whether two decisions' facts count the same.
func (f countedFacts) same(o countedFacts) bool {
	return f.Category == o.Category && f.Review == o.Review && f.ResolvedAt.Equal(o.ResolvedAt) &&
		f.Arrived.Equal(o.Arrived) && (f.Rubric == nil) == (o.Rubric == nil) && slices.Equal(f.Rubric, o.Rubric)
}

// countedFacts is what a decision adds to its cell: its facts and when it
// arrived (the start of its time to promotion).
type countedFacts struct {
	Facts
	Arrived time.Time
}

// newCounted is what a decision's facts count, its times in whole
// seconds as the file keeps them: what a step adds is then exactly what a
// later step, reading the record back, takes away.
func newCounted(f Facts, arrived time.Time) countedFacts {
	f.ResolvedAt = timeOrZero(unixOrZero(f.ResolvedAt))
	return countedFacts{Facts: f, Arrived: timeOrZero(unixOrZero(arrived))}
}

// addFacts adds what a decision's facts count to the cell (sign 1), or
// takes them away (-1) before counting newer ones.
func (c *Cell) addFacts(f countedFacts, sign int64, in *interner) {
	if f.Category != "" {
		c.Lessons = c.Lessons.add(in.id(f.Category), sign)
	}
	if f.Rubric != nil {
		c.Scored += sign
		for _, a := range f.Rubric {
			if a.Met {
				c.RubricMet = c.RubricMet.add(in.id(a.Name), sign)
			}
			c.RubricSeen = c.RubricSeen.add(in.id(a.Name), sign)
		}
	}
	switch f.Review {
	case NotUnclear:
		return
	case Resolved:
		c.UnclearResolved += sign
		c.Promotions = c.Promotions.add(durationBin(promotionSeconds(f)), sign)
	case NeedsHumanReview:
		c.UnclearNeedsReview += sign
	}
	c.Unclear += sign
}

// promotionSeconds is the time from a decision's arrival to the reply
// that resolved it, in whole seconds, never negative.
func promotionSeconds(f countedFacts) int64 {
	if f.ResolvedAt.IsZero() || f.Arrived.IsZero() {
		return 0
	}
	return max(int64(f.ResolvedAt.Sub(f.Arrived)/time.Second), 0)
}

// arrival is when a decision arrived: when precept received it, else its
// own timestamp.
func arrival(received, timestamp time.Time) time.Time {
	if !received.IsZero() {
		return received
	}
	return timestamp
}

// A decision's record in the file (bucket decisions) is the cell key's
// length (2 bytes), the cell key, then as uvarints: the arrival and the
// resolution (Unix seconds, 0 for none), the review, the category and
// the rubric's attributes, each a met flag and a name.
func encodeFacts(k cellKey, f countedFacts) []byte {
	kb := k.bytes()
	b := make([]byte, 2, 2+len(kb)+32+len(f.Category)+16*len(f.Rubric))
	binary.BigEndian.PutUint16(b, uint16(len(kb)))
	b = append(b, kb...)
	b = binary.AppendUvarint(b, unixOrZero(f.Arrived))
	b = binary.AppendUvarint(b, unixOrZero(f.ResolvedAt))
	b = binary.AppendUvarint(b, uint64(f.Review))
	b = appendString(b, f.Category)
	if f.Rubric == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(f.Rubric))+1)
	for _, a := range f.Rubric {
		met := uint64(0)
		if a.Met {
			met = 1
		}
		b = binary.AppendUvarint(b, met)
		b = appendString(b, a.Name)
	}
	return b
}

func decodeFacts(v []byte) (cellKey, countedFacts, error) {
	if len(v) < 2 || int(binary.BigEndian.Uint16(v))+2 > len(v) {
		return cellKey{}, countedFacts{}, fmt.Errorf("%w: decision record of %d bytes", errCorrupt, len(v))
	}
	n := int(binary.BigEndian.Uint16(v))
	k, err := parseCellKey(v[2 : 2+n])
	if err != nil {
		return cellKey{}, countedFacts{}, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	d := &decoder{b: v[2+n:]}
	var f countedFacts
	f.Arrived = timeOrZero(d.uint())
	f.ResolvedAt = timeOrZero(d.uint())
	f.Review = Review(d.uint())
	f.Category = d.string()
	// The rubric's length is stored plus one, 0 standing for none.
	if attrs := d.uint(); attrs > 0 && attrs-1 <= uint64(len(d.b)) {
		f.Rubric = make([]Attribute, 0, attrs-1)
		for range attrs - 1 {
			met := d.uint() == 1
			f.Rubric = append(f.Rubric, Attribute{Name: d.string(), Met: met})
		}
	} else if attrs > 0 {
		d.err = fmt.Errorf("%w: rubric of %d attributes", errCorrupt, attrs-1)
	}
	if d.err == nil && (f.Review > NeedsHumanReview || len(d.b) > 0) {
		d.err = fmt.Errorf("%w: decision record", errCorrupt)
	}
	return k, f, d.err
}

func unixOrZero(t time.Time) uint64 {
	if t.IsZero() || t.Unix() < 0 {
		return 0
	}
	return uint64(t.Unix())
}

func timeOrZero(s uint64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(int64(s), 0).UTC()
}

// A pending record (bucket pending) is the arrival (Unix seconds, 8
// bytes) and the cell key.
func encodePending(k cellKey, arrived time.Time) []byte {
	return append(binary.BigEndian.AppendUint64(nil, unixOrZero(arrived)), k.bytes()...)
}

func decodePending(v []byte) (cellKey, time.Time, error) {
	if len(v) < 8 {
		return cellKey{}, time.Time{}, fmt.Errorf("%w: pending record of %d bytes", errCorrupt, len(v))
	}
	k, err := parseCellKey(v[8:])
	if err != nil {
		return cellKey{}, time.Time{}, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return k, timeOrZero(binary.BigEndian.Uint64(v)), nil
}

// Fill is how often one rubric attribute was met.
type Fill struct {
	Name string
	// Evaluations scored the attribute; Met of them found it.
	Evaluations int64
	Met         int64
	Rate        float64
}

// unclearAcc adds up the unclear-feedback figures of cells for a query.
type unclearAcc struct {
	promo dense
	hi    int
	// attrs counts the rubric's attributes by interned id: a rubric has
	// a handful, so a short list searched in turn costs less than arrays
	// sized to every name there is in each accumulator.
	attrs []attrCount
}

// attrCount is how many evaluations scored one rubric attribute and how
// many of them found it.
type attrCount struct {
	id        uint32
	seen, met int64
}

func (u *unclearAcc) addAttr(id uint32, seen, met int64) {
	for i := range u.attrs {
		if u.attrs[i].id == id {
			u.attrs[i].seen += seen
			u.attrs[i].met += met
			return
		}
	}
	u.attrs = append(u.attrs, attrCount{id: id, seen: seen, met: met})
}

func (u *unclearAcc) merge(c *Cell) {
	if n := len(c.Promotions); n > 0 {
		u.promo.merge(c.Promotions)
		u.hi = max(u.hi, int(c.Promotions[n-1].B)+1)
	}
	for _, l := range c.RubricSeen {
		u.addAttr(l.ID, l.N, 0)
	}
	for _, l := range c.RubricMet {
		u.addAttr(l.ID, 0, l.N)
	}
}

func (u *unclearAcc) mergeAcc(o *unclearAcc) {
	for i, n := range o.promo[:o.hi] {
		u.promo[i] += n
	}
	u.hi = max(u.hi, o.hi)
	for _, at := range o.attrs {
		u.addAttr(at.id, at.seen, at.met)
	}
}

func (u *unclearAcc) reset() {
	clear(u.promo[:u.hi])
	u.hi = 0
	u.attrs = u.attrs[:0]
}

// figures fills in f's unclear-feedback figures from the cell sums c and
// the accumulator; lists says whether the fill rates are wanted, cut
// from slab when it is not nil (as countsIn does).
func (u *unclearAcc) figures(f *Figures, c *Cell, names []string, lists bool, slab *[]Fill) {
	f.Unclear, f.UnclearResolved, f.UnclearNeedsReview = c.Unclear, c.UnclearResolved, c.UnclearNeedsReview
	f.UnclearOpen = c.Unclear - c.UnclearResolved - c.UnclearNeedsReview
	if ended := c.UnclearResolved + c.UnclearNeedsReview; ended > 0 {
		f.ResolutionRate = float64(c.UnclearResolved) / float64(ended)
	}
	f.Promotions = u.promo.count(u.hi)
	f.PromotionP50Seconds, f.PromotionP90Seconds = u.promo.medianAndP90(f.Promotions, u.hi)
	f.RubricEvaluations = c.Scored
	n := len(u.attrs)
	if !lists || n == 0 {
		return
	}
	var out []Fill
	if slab == nil {
		out = make([]Fill, 0, n)
	} else {
		if cap(*slab)-len(*slab) < n {
			*slab = make([]Fill, 0, max(1024, n))
		}
		k := len(*slab)
		*slab = (*slab)[:k+n]
		out = (*slab)[k : k : k+n]
	}
	for _, at := range u.attrs {
		fl := Fill{Name: names[at.id], Evaluations: at.seen, Met: at.met}
		if fl.Evaluations > 0 {
			fl.Rate = float64(fl.Met) / float64(fl.Evaluations)
		}
		out = append(out, fl)
	}
	// By name, so the rubric's attributes read the same in every bucket;
	// a rubric has a handful, which an insertion sort orders cheapest.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	f.RubricFill = out
}
