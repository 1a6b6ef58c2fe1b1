package analytics

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
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
	N     int64 `json:"n"`
	Total int64 `json:"t"`
}

// Cell holds the figures of one agent at one gate on one day, as counts
// and sums that add up across cells (docs/analytics.md).
type Cell struct {
	Approved            int64 `json:"approved,omitempty"`
	Rejected            int64 `json:"rejected,omitempty"`
	ApprovedWithChanges int64 `json:"approved_with_changes,omitempty"`
	// FirstAttempts counts decisions that were the first on their work
	// item; FirstPassAccepted those of them that were APPROVED.
	FirstAttempts     int64 `json:"first_attempts,omitempty"`
	FirstPassAccepted int64 `json:"first_pass_accepted,omitempty"`
	// EditPercent sums the character edit distance (0-100) of decisions
	// that sent both outputs; LinesChanged the lines added and removed in
	// correction diffs.
	EditPercent  Sum              `json:"edit_percent,omitzero"`
	LinesChanged Sum              `json:"lines_changed,omitzero"`
	Durations    Histogram        `json:"durations,omitempty"`
	Tags         map[string]int64 `json:"tags,omitempty"`
	ErrorCats    map[string]int64 `json:"error_categories,omitempty"`
	Lessons      map[string]int64 `json:"lessons,omitempty"`
	Quality      map[string]Sum   `json:"quality,omitempty"`
}

func (c *Cell) clone() *Cell {
	n := *c
	n.Durations = slices.Clone(c.Durations)
	n.Tags = maps.Clone(c.Tags)
	n.ErrorCats = maps.Clone(c.ErrorCats)
	n.Lessons = maps.Clone(c.Lessons)
	n.Quality = maps.Clone(c.Quality)
	return &n
}

// decisions counts the cell's decisions.
func (c *Cell) decisions() int64 { return c.Approved + c.Rejected + c.ApprovedWithChanges }

// addDecision counts a stored decision; first says whether it was the
// first decision on its work item.
func (c *Cell) addDecision(f precept.Feedback, first bool) {
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
	c.Tags = count(c.Tags, f.Tags)
	c.ErrorCats = count(c.ErrorCats, f.ErrorCategories)
	for k, v := range f.QualityScores {
		if c.Quality == nil {
			c.Quality = map[string]Sum{}
		}
		s := c.Quality[k]
		s.N++
		s.Total += int64(v)
		c.Quality[k] = s
	}
}

// addLesson moves the count of a lesson category by n (1 or -1).
func (c *Cell) addLesson(category string, n int64) {
	if c.Lessons == nil {
		c.Lessons = map[string]int64{}
	}
	c.Lessons[category] += n
	if c.Lessons[category] <= 0 {
		delete(c.Lessons, category)
	}
}

func count(m map[string]int64, labels []string) map[string]int64 {
	if len(labels) == 0 {
		return m
	}
	if m == nil {
		m = make(map[string]int64, len(labels))
	}
	for _, l := range labels {
		m[l]++
	}
	return m
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
	for len(diff) > 0 {
		line := diff
		if i := strings.IndexByte(diff, '\n'); i >= 0 {
			line, diff = diff[:i], diff[i+1:]
		} else {
			diff = ""
		}
		if strings.HasPrefix(line, "+++") || strings.HasPrefix(line, "---") {
			continue
		}
		if strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-") {
			n++
		}
	}
	return n
}

// acc adds cells up for a query.
type acc struct {
	c    Cell
	dur  dense
	tags map[string]int64
	errs map[string]int64
	less map[string]int64
	qual map[string]Sum
}

func (a *acc) merge(c *Cell) {
	a.c.Approved += c.Approved
	a.c.Rejected += c.Rejected
	a.c.ApprovedWithChanges += c.ApprovedWithChanges
	a.c.FirstAttempts += c.FirstAttempts
	a.c.FirstPassAccepted += c.FirstPassAccepted
	a.c.EditPercent.N += c.EditPercent.N
	a.c.EditPercent.Total += c.EditPercent.Total
	a.c.LinesChanged.N += c.LinesChanged.N
	a.c.LinesChanged.Total += c.LinesChanged.Total
	a.dur.merge(c.Durations)
	a.tags = mergeCounts(a.tags, c.Tags)
	a.errs = mergeCounts(a.errs, c.ErrorCats)
	a.less = mergeCounts(a.less, c.Lessons)
	for k, s := range c.Quality {
		if a.qual == nil {
			a.qual = map[string]Sum{}
		}
		t := a.qual[k]
		t.N += s.N
		t.Total += s.Total
		a.qual[k] = t
	}
}

// mergeAcc adds another accumulator (a bucket into the totals).
func (a *acc) mergeAcc(b *acc) {
	c := b.c
	c.Tags, c.ErrorCats, c.Lessons, c.Quality = b.tags, b.errs, b.less, b.qual
	a.merge(&c)
	for i, n := range b.dur {
		a.dur[i] += n
	}
}

func mergeCounts(into, from map[string]int64) map[string]int64 {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = make(map[string]int64, len(from))
	}
	for k, n := range from {
		into[k] += n
	}
	return into
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
}

func (a *acc) figures() Figures {
	c := a.c
	f := Figures{
		Decisions: c.decisions(), Approved: c.Approved, Rejected: c.Rejected, ApprovedWithChanges: c.ApprovedWithChanges,
		FirstAttempts: c.FirstAttempts, FirstPassAccepted: c.FirstPassAccepted,
		EditDistanceCount: c.EditPercent.N, CorrectionDiffs: c.LinesChanged.N, LinesChanged: c.LinesChanged.Total,
		Tags: counts(a.tags), ErrorCategories: counts(a.errs), LessonCategories: counts(a.less),
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
	f.ReviewDurations = a.dur.count()
	f.ReviewP50Seconds = a.dur.quantile(0.5, f.ReviewDurations)
	f.ReviewP90Seconds = a.dur.quantile(0.9, f.ReviewDurations)
	for _, k := range slices.Sorted(maps.Keys(a.qual)) {
		s := a.qual[k]
		f.QualityScores = append(f.QualityScores, Mean{Name: k, Count: s.N, Mean: float64(s.Total) / float64(s.N)})
	}
	return f
}

// counts lists a distribution most frequent first, then by name.
func counts(m map[string]int64) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{Name: k, Count: n})
	}
	slices.SortFunc(out, func(a, b Count) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
