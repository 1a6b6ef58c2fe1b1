package analytics

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/precept-dev/precept"
)

// cellKey names a cell: one agent at one gate on one UTC day.
type cellKey struct {
	Day   int32 // days since 1970-01-01, UTC
	Agent string
	Gate  string
}

func dayOf(t time.Time) int32 { return int32(t.UTC().Unix() / 86400) }

func dayStart(day int32) time.Time { return time.Unix(int64(day)*86400, 0).UTC() }

// bytes encodes the key so that bbolt keeps cells in day order: the day
// big-endian, the agent, a NUL (which no agent or gate id holds), the
// gate.
func (k cellKey) bytes() []byte {
	b := make([]byte, 4, 4+len(k.Agent)+1+len(k.Gate))
	binary.BigEndian.PutUint32(b, uint32(k.Day))
	b = append(b, k.Agent...)
	b = append(b, 0)
	return append(b, k.Gate...)
}

func parseCellKey(b []byte) (cellKey, error) {
	if len(b) < 5 {
		return cellKey{}, fmt.Errorf("cell key of %d bytes", len(b))
	}
	agent, gate, ok := strings.Cut(string(b[4:]), "\x00")
	if !ok {
		return cellKey{}, fmt.Errorf("cell key without a separator")
	}
	return cellKey{Day: int32(binary.BigEndian.Uint32(b)), Agent: agent, Gate: gate}, nil
}

// Sum is a count and a total, for means.
type Sum struct {
	N     int64
	Total int64
}

// Label counts one label (a tag, an error category or a lesson category)
// by its interned id.
type Label struct {
	ID uint32
	N  int64
}

// Labels is a distribution, ids in order.
type Labels []Label

func (ls Labels) add(id uint32, n int64) Labels {
	i, found := slices.BinarySearchFunc(ls, id, func(l Label, t uint32) int { return cmp.Compare(l.ID, t) })
	if found {
		ls[i].N += n
		if ls[i].N <= 0 {
			ls = slices.Delete(ls, i, i+1)
		}
		return ls
	}
	if n <= 0 {
		return ls
	}
	return slices.Insert(ls, i, Label{ID: id, N: n})
}

// Score sums one quality score by its interned name.
type Score struct {
	ID uint32
	Sum
}

// Cell holds the figures of one agent at one gate on one day, as counts
// and sums that add up across cells (docs/analytics.md). Label and score
// names are interned per process (interner); the file stores them by
// name (encode.go).
type Cell struct {
	Approved            int64
	Rejected            int64
	ApprovedWithChanges int64
	// FirstAttempts counts decisions that were the first on their work
	// item; FirstPassAccepted those of them that were APPROVED.
	FirstAttempts     int64
	FirstPassAccepted int64
	// EditPercent sums the character edit distance (0-100) of decisions
	// that sent both outputs; LinesChanged the lines added and removed in
	// correction diffs.
	EditPercent  Sum
	LinesChanged Sum
	Durations    Histogram
	Tags         Labels
	ErrorCats    Labels
	Lessons      Labels
	Quality      []Score
	// Unclear counts the decisions the evaluator found unclear, and of
	// them UnclearResolved those a clarification resolved and
	// UnclearNeedsReview those left for human review; Promotions holds
	// the resolved ones' times from arrival to resolution (unclear.go).
	Unclear            int64
	UnclearResolved    int64
	UnclearNeedsReview int64
	Promotions         Histogram
	// Scored counts the evaluations that applied the clarity rubric;
	// RubricSeen counts each attribute they scored, RubricMet each they
	// found.
	Scored     int64
	RubricSeen Labels
	RubricMet  Labels
}

func (c *Cell) clone() *Cell {
	n := *c
	n.Durations = slices.Clone(c.Durations)
	n.Tags = slices.Clone(c.Tags)
	n.ErrorCats = slices.Clone(c.ErrorCats)
	n.Lessons = slices.Clone(c.Lessons)
	n.Quality = slices.Clone(c.Quality)
	n.Promotions = slices.Clone(c.Promotions)
	n.RubricSeen = slices.Clone(c.RubricSeen)
	n.RubricMet = slices.Clone(c.RubricMet)
	return &n
}

// decisions counts the cell's decisions.
func (c *Cell) decisions() int64 { return c.Approved + c.Rejected + c.ApprovedWithChanges }

// addDecision counts a stored decision; first says whether it was the
// first decision on its work item.
func (c *Cell) addDecision(f precept.Feedback, first bool, in *interner) {
	switch f.Decision.Decision {
	case precept.Approved:
		c.Approved++
	case precept.Rejected:
		c.Rejected++
	case precept.ApprovedWithChanges:
		c.ApprovedWithChanges++
	}
	if first {
		c.FirstAttempts++
		if f.Decision.Decision == precept.Approved {
			c.FirstPassAccepted++
		}
	}
	if p, ok := editPercent(f); ok {
		c.EditPercent.N++
		c.EditPercent.Total += int64(p)
	}
	if f.CorrectionDiff != "" {
		c.LinesChanged.N++
		c.LinesChanged.Total += int64(LinesChanged(f.CorrectionDiff))
	}
	if d := f.ReviewDurationSeconds; d != nil {
		c.Durations = c.Durations.add(durationBin(*d), 1)
	}
	for _, t := range f.Tags {
		c.Tags = c.Tags.add(in.id(t), 1)
	}
	for _, t := range f.ErrorCategories {
		c.ErrorCats = c.ErrorCats.add(in.id(t), 1)
	}
	for k, v := range f.QualityScores {
		c.addScore(in.id(k), Sum{N: 1, Total: int64(v)})
	}
}

func (c *Cell) addScore(id uint32, s Sum) {
	i, found := slices.BinarySearchFunc(c.Quality, id, func(q Score, t uint32) int { return cmp.Compare(q.ID, t) })
	if !found {
		if s.N <= 0 {
			return
		}
		c.Quality = slices.Insert(c.Quality, i, Score{ID: id})
	}
	c.Quality[i].N += s.N
	c.Quality[i].Total += s.Total
	if c.Quality[i].N <= 0 {
		c.Quality = slices.Delete(c.Quality, i, i+1)
	}
}

// addCell adds another cell's counts (sign 1) or takes them away (-1):
// rolled-up cells follow the cells they sum.
func (c *Cell) addCell(o *Cell, sign int64) {
	c.Approved += sign * o.Approved
	c.Rejected += sign * o.Rejected
	c.ApprovedWithChanges += sign * o.ApprovedWithChanges
	c.FirstAttempts += sign * o.FirstAttempts
	c.FirstPassAccepted += sign * o.FirstPassAccepted
	c.EditPercent.N += sign * o.EditPercent.N
	c.EditPercent.Total += sign * o.EditPercent.Total
	c.LinesChanged.N += sign * o.LinesChanged.N
	c.LinesChanged.Total += sign * o.LinesChanged.Total
	for _, b := range o.Durations {
		c.Durations = c.Durations.add(int(b.B), sign*b.N)
	}
	for _, l := range o.Tags {
		c.Tags = c.Tags.add(l.ID, sign*l.N)
	}
	for _, l := range o.ErrorCats {
		c.ErrorCats = c.ErrorCats.add(l.ID, sign*l.N)
	}
	for _, l := range o.Lessons {
		c.Lessons = c.Lessons.add(l.ID, sign*l.N)
	}
	for _, q := range o.Quality {
		c.addScore(q.ID, Sum{N: sign * q.N, Total: sign * q.Total})
	}
	c.Unclear += sign * o.Unclear
	c.UnclearResolved += sign * o.UnclearResolved
	c.UnclearNeedsReview += sign * o.UnclearNeedsReview
	c.Scored += sign * o.Scored
	for _, b := range o.Promotions {
		c.Promotions = c.Promotions.add(int(b.B), sign*b.N)
	}
	for _, l := range o.RubricSeen {
		c.RubricSeen = c.RubricSeen.add(l.ID, sign*l.N)
	}
	for _, l := range o.RubricMet {
		c.RubricMet = c.RubricMet.add(l.ID, sign*l.N)
	}
}

// editPercent is the decision's character edit distance: the one the
// feedback record carries (computed once at ingest), or computed here for
// a record stored without it. Both use precept.EditDistancePercent, whose
// diff is bounded (docs/analytics.md, "Edit distance").
func editPercent(f precept.Feedback) (int32, bool) {
	if f.EditDistancePercent != nil {
		return *f.EditDistancePercent, true
	}
	if f.AgentOutput == "" || f.ApprovedOutput == "" {
		return 0, false
	}
	return precept.EditDistancePercent(f.AgentOutput, f.ApprovedOutput), true
}

// LinesChanged counts the lines a unified diff adds or removes, without
// its file headers: one pass over the text.
func LinesChanged(diff string) int {
	n := 0
	// Inside a hunk its header's line counts say which lines belong to
	// it, so a removed "-- comment" or an added "++i" is a change, not a
	// file header.
	oldLeft, newLeft := 0, 0
	for len(diff) > 0 {
		line := diff
		if i := strings.IndexByte(diff, '\n'); i >= 0 {
			line, diff = diff[:i], diff[i+1:]
		} else {
			diff = ""
		}
		switch {
		case oldLeft > 0 || newLeft > 0:
			switch {
			case strings.HasPrefix(line, "-"):
				n++
				oldLeft--
			case strings.HasPrefix(line, "+"):
				n++
				newLeft--
			case strings.HasPrefix(line, "\\"):
				// "\ No newline at end of file"
			default:
				oldLeft--
				newLeft--
			}
		case strings.HasPrefix(line, "@@"):
			oldLeft, newLeft = hunkSizes(line)
		case strings.HasPrefix(line, "+++") || strings.HasPrefix(line, "---"):
		case strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-"):
			n++
		}
	}
	return n
}

// hunkSizes reads "@@ -l[,s] +l[,s] @@": the old and new line counts
// (1 when a count is left out), 0 and 0 when the header is not one.
func hunkSizes(header string) (int, int) {
	f := strings.Fields(header)
	if len(f) < 3 || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0
	}
	size := func(r string) int {
		_, s, ok := strings.Cut(r[1:], ",")
		if !ok {
			return 1
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return size(f[1]), size(f[2])
}

// acc adds cells up for a query: dense counts indexed by interned id,
// with the ids in use listed, so that reading, merging and clearing an
// accumulator costs the labels it holds, not every label there is.
type acc struct {
	c   Cell
	dur dense
	// hi bounds the bins of dur in use, so a sparse histogram costs its
	// own width, not numBins, to add up, read and clear.
	hi   int
	tags dist
	errs dist
	less dist
	qual []Sum
	// qualIDs lists the ids of qual in use.
	qualIDs []uint32
	unclear unclearAcc
}

// dist is a distribution by interned id and the ids in use.
type dist struct {
	n   []int64
	ids []uint32
}

func (d *dist) add(id uint32, n int64) {
	if d.n[id] == 0 {
		d.ids = append(d.ids, id)
	}
	d.n[id] += n
}

func (d *dist) reset() {
	for _, id := range d.ids {
		d.n[id] = 0
	}
	d.ids = d.ids[:0]
}

func newAcc(names int) *acc {
	return &acc{tags: dist{n: make([]int64, names)}, errs: dist{n: make([]int64, names)}, less: dist{n: make([]int64, names)},
		qual: make([]Sum, names)}
}

func (a *acc) reset() {
	a.c = Cell{}
	clear(a.dur[:a.hi])
	a.hi = 0
	a.tags.reset()
	a.errs.reset()
	a.less.reset()
	for _, id := range a.qualIDs {
		a.qual[id] = Sum{}
	}
	a.qualIDs = a.qualIDs[:0]
	a.unclear.reset()
}

// counts adds the counts and sums of c, not its distributions.
func (a *acc) counts(c *Cell) {
	a.c.Approved += c.Approved
	a.c.Rejected += c.Rejected
	a.c.ApprovedWithChanges += c.ApprovedWithChanges
	a.c.FirstAttempts += c.FirstAttempts
	a.c.FirstPassAccepted += c.FirstPassAccepted
	a.c.EditPercent.N += c.EditPercent.N
	a.c.EditPercent.Total += c.EditPercent.Total
	a.c.LinesChanged.N += c.LinesChanged.N
	a.c.LinesChanged.Total += c.LinesChanged.Total
	a.c.Unclear += c.Unclear
	a.c.UnclearResolved += c.UnclearResolved
	a.c.UnclearNeedsReview += c.UnclearNeedsReview
	a.c.Scored += c.Scored
}

func (a *acc) addScore(id uint32, s Sum) {
	if a.qual[id].N == 0 {
		a.qualIDs = append(a.qualIDs, id)
	}
	a.qual[id].N += s.N
	a.qual[id].Total += s.Total
}

func (a *acc) merge(c *Cell) {
	a.counts(c)
	if n := len(c.Durations); n > 0 {
		a.dur.merge(c.Durations)
		a.hi = max(a.hi, int(c.Durations[n-1].B)+1)
	}
	for _, l := range c.Tags {
		a.tags.add(l.ID, l.N)
	}
	for _, l := range c.ErrorCats {
		a.errs.add(l.ID, l.N)
	}
	for _, l := range c.Lessons {
		a.less.add(l.ID, l.N)
	}
	for _, q := range c.Quality {
		a.addScore(q.ID, q.Sum)
	}
	a.unclear.merge(c)
}

// mergeAcc adds another accumulator (a bucket into its series' totals).
func (a *acc) mergeAcc(b *acc) {
	a.counts(&b.c)
	for i, n := range b.dur[:b.hi] {
		a.dur[i] += n
	}
	a.hi = max(a.hi, b.hi)
	for _, pair := range [][2]*dist{{&a.tags, &b.tags}, {&a.errs, &b.errs}, {&a.less, &b.less}} {
		into, from := pair[0], pair[1]
		for _, id := range from.ids {
			into.add(id, from.n[id])
		}
	}
	for _, id := range b.qualIDs {
		a.addScore(id, b.qual[id])
	}
	a.unclear.mergeAcc(&b.unclear)
}

// Count is how often a label was seen.
type Count struct {
	Name  string
	Count int64
}

// Mean is a quality score's mean over the decisions that carried it.
type Mean struct {
	Name  string
	Count int64
	Mean  float64
}

// Figures are what a set of cells adds up to (docs/analytics.md).
type Figures struct {
	Decisions           int64
	Approved            int64
	Rejected            int64
	ApprovedWithChanges int64
	// FirstAttempts are decisions that were the first on their work item;
	// FirstPassAcceptance is the share of them APPROVED (0 without any).
	FirstAttempts       int64
	FirstPassAccepted   int64
	FirstPassAcceptance float64
	// EditDistanceCount decisions sent both outputs; their character edit
	// distance averages EditDistanceMeanPercent.
	EditDistanceCount       int64
	EditDistanceMeanPercent float64
	// CorrectionDiffs decisions carried a correction diff, changing
	// LinesChanged lines in all.
	CorrectionDiffs  int64
	LinesChanged     int64
	LinesChangedMean float64
	// ReviewDurations decisions carried a review duration.
	ReviewDurations  int64
	ReviewP50Seconds float64
	ReviewP90Seconds float64
	Tags             []Count
	ErrorCategories  []Count
	LessonCategories []Count
	QualityScores    []Mean
	// Unclear decisions are those the evaluator found unclear (AMBIGUOUS):
	// UnclearResolved a clarification resolved, UnclearNeedsReview were
	// left for human review, UnclearOpen are still being clarified.
	// ResolutionRate is resolved / (resolved + needs review), 0 when
	// neither (docs/analytics.md, "Unclear feedback").
	Unclear            int64
	UnclearResolved    int64
	UnclearNeedsReview int64
	UnclearOpen        int64
	ResolutionRate     float64
	// Promotions resolved decisions took PromotionP50Seconds (median)
	// and PromotionP90Seconds from arrival to the resolving reply.
	Promotions          int64
	PromotionP50Seconds float64
	PromotionP90Seconds float64
	// RubricEvaluations applied the clarity rubric; RubricFill is, per
	// attribute, how many of them found it, by name.
	RubricEvaluations int64
	RubricFill        []Fill
}

func (a *acc) figures(names []string) Figures { return a.figuresIn(nil, nil, names, true) }

// figuresIn is figures with its lists cut from slab and fills; without
// lists the distributions (tags, categories, quality scores, rubric fill
// rates) are left out.
func (a *acc) figuresIn(slab *[]Count, fills *[]Fill, names []string, lists bool) Figures {
	c := a.c
	f := Figures{
		Decisions: c.decisions(), Approved: c.Approved, Rejected: c.Rejected, ApprovedWithChanges: c.ApprovedWithChanges,
		FirstAttempts: c.FirstAttempts, FirstPassAccepted: c.FirstPassAccepted,
		EditDistanceCount: c.EditPercent.N, CorrectionDiffs: c.LinesChanged.N, LinesChanged: c.LinesChanged.Total,
	}
	if lists {
		f.Tags, f.ErrorCategories, f.LessonCategories = a.tags.countsIn(slab, names), a.errs.countsIn(slab, names), a.less.countsIn(slab, names)
	}
	if c.FirstAttempts > 0 {
		f.FirstPassAcceptance = float64(c.FirstPassAccepted) / float64(c.FirstAttempts)
	}
	if c.EditPercent.N > 0 {
		f.EditDistanceMeanPercent = float64(c.EditPercent.Total) / float64(c.EditPercent.N)
	}
	if c.LinesChanged.N > 0 {
		f.LinesChangedMean = float64(c.LinesChanged.Total) / float64(c.LinesChanged.N)
	}
	f.ReviewDurations = a.dur.count(a.hi)
	f.ReviewP50Seconds, f.ReviewP90Seconds = a.dur.medianAndP90(f.ReviewDurations, a.hi)
	a.unclear.figures(&f, &c, names, lists, fills)
	if !lists {
		return f
	}
	if len(a.qualIDs) > 0 {
		f.QualityScores = make([]Mean, 0, len(a.qualIDs))
	}
	for _, id := range a.qualIDs {
		s := a.qual[id]
		f.QualityScores = append(f.QualityScores, Mean{Name: names[id], Count: s.N, Mean: float64(s.Total) / float64(s.N)})
	}
	slices.SortFunc(f.QualityScores, func(a, b Mean) int { return strings.Compare(a.Name, b.Name) })
	return f
}

// countsIn lists a distribution most frequent first, then by name, cut
// from slab when it is not nil (a query's 4,500 buckets allocate a few
// slabs rather than 13,500 lists).
func (d *dist) countsIn(slab *[]Count, names []string) []Count {
	if len(d.ids) == 0 {
		return nil
	}
	var out []Count
	if slab == nil {
		out = make([]Count, len(d.ids))
	} else {
		if cap(*slab)-len(*slab) < len(d.ids) {
			// Grow by doubling up to 4096, so small queries stay small.
			*slab = make([]Count, 0, max(min(4096, 2*cap(*slab)+64), len(d.ids)))
		}
		n := len(*slab)
		*slab = (*slab)[:n+len(d.ids)]
		out = (*slab)[n : n+len(d.ids) : n+len(d.ids)]
	}
	for i, id := range d.ids {
		out[i] = Count{Name: names[id], Count: d.n[id]}
	}
	if len(out) > 16 {
		slices.SortFunc(out, func(a, b Count) int {
			if before(a, b) {
				return -1
			}
			if before(b, a) {
				return 1
			}
			return 0
		})
		return out
	}
	// Few labels, the usual case: an insertion sort costs least.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && before(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func before(a, b Count) bool {
	if a.Count != b.Count {
		return a.Count > b.Count
	}
	return a.Name < b.Name
}
