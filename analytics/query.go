package analytics

import (
	"cmp"
	"slices"
	"time"

	"github.com/precept-dev/precept"
)

// Granularity is the length of a query's buckets.
type Granularity int

// The granularities; days are UTC days, weeks start on Monday, months
// on the first.
const (
	Day Granularity = iota + 1
	Week
	Month
)

func (g Granularity) String() string {
	switch g {
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return "day"
}

// start returns the start of the period holding day.
func (g Granularity) start(day int32) int32 {
	switch g {
	case Week:
		// 1970-01-01 was a Thursday: day 4 was a Monday.
		return day - ((day-4)%7+7)%7
	case Month:
		t := dayStart(day)
		return dayOf(time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC))
	}
	return day
}

// next returns the start of the period after the one starting at day.
func (g Granularity) next(day int32) int32 {
	switch g {
	case Week:
		return day + 7
	case Month:
		t := dayStart(day)
		return dayOf(time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC))
	}
	return day + 1
}

// Split says how a query's figures are broken down besides time.
type Split int

// The splits.
const (
	SplitNone Split = iota
	SplitAgent
	SplitGate
)

// Query asks for figures over a range, optionally for some agents or
// gates only.
type Query struct {
	// Agents and Gates keep only these; empty keeps all.
	Agents []string
	Gates  []string
	// From and To bound the range [From, To): every UTC day that
	// overlaps it is counted whole. A zero To is the end of today, a zero
	// From 30 days before To.
	From, To    time.Time
	Granularity Granularity
	Split       Split
	// TotalsOnlyLists leaves the distributions (tags, error and lesson
	// categories, quality scores) out of each bucket; the totals keep
	// them. A chart of rates and counts per period needs none, and they
	// are most of a long split report.
	TotalsOnlyLists bool
	// Top keeps only the Top series with the most decisions (then by
	// agent or gate), in order; 0 keeps all. The totals still count
	// every series.
	Top int
}

// maxFilter bounds the agents or gates a query may name.
const maxFilter = 200

// Bucket is one period's figures.
type Bucket struct {
	Start, End time.Time
	Figures
}

// Series is the buckets of one agent or gate (when split), or of all.
type Series struct {
	Agent, Gate string
	Buckets     []Bucket
	Totals      Figures
}

// Report answers a Query.
type Report struct {
	// From and To are the range counted, whole days.
	From, To    time.Time
	Granularity Granularity
	Series      []Series
	Totals      Figures
	// Position is the feedback-store position the figures include.
	Position uint64
	// SeriesTotal is how many series matched, Series holding them all
	// unless the query asked for its Top.
	SeriesTotal int
}

// Query computes the figures of q from the cells in memory: its cost
// grows with the days and cells in range, never with the decisions.
func (a *Aggregate) Query(q Query) (Report, error) {
	from, to, err := a.bounds(q)
	if err != nil {
		return Report{}, err
	}
	if q.Granularity == 0 {
		q.Granularity = Day
	}
	agents, gates := set(q.Agents), set(q.Gates)
	keyOf := func(k cellKey) string {
		switch q.Split {
		case SplitAgent:
			return k.Agent
		case SplitGate:
			return k.Gate
		}
		return ""
	}
	// One accumulator per series for the bucket being added up, one for
	// the series' totals; buckets are finished one at a time.
	type group struct {
		key     string
		bucket  *acc
		total   *acc
		buckets []Bucket
	}
	var starts []int32
	for d := q.Granularity.start(from); d < to; d = q.Granularity.next(d) {
		starts = append(starts, d)
	}
	groups := map[string]*group{}
	var slab []Count
	var fills []Fill

	a.mu.RLock()
	defer a.mu.RUnlock()
	names := a.names.names
	// Without a gate filter or split, the cells rolled up per day and
	// agent answer the same with a fraction of the work.
	byDay := a.byDay
	if gates == nil && q.Split != SplitGate {
		byDay = a.rollDay
	}
	for bi, start := range starts {
		end := q.Granularity.next(start)
		for d := max(start, from); d < min(end, to); d++ {
			for _, e := range byDay[d] {
				if (agents != nil && !agents[e.key.Agent]) || (gates != nil && !gates[e.key.Gate]) {
					continue
				}
				gk := keyOf(e.key)
				g := groups[gk]
				if g == nil {
					if len(groups) == a.opts.MaxSeries {
						return Report{}, precept.Errorf(precept.Invalid, "split: more than %d series match; name agents or gates, or split less", a.opts.MaxSeries)
					}
					g = &group{key: gk, bucket: newAcc(len(names)), total: newAcc(len(names)), buckets: make([]Bucket, bi, len(starts))}
					for i := range bi {
						g.buckets[i] = Bucket{Start: dayStart(starts[i]), End: dayStart(q.Granularity.next(starts[i]))}
					}
					groups[gk] = g
				}
				g.bucket.merge(e.cell)
			}
		}
		for _, g := range groups {
			g.buckets = append(g.buckets, Bucket{Start: dayStart(start), End: dayStart(end), Figures: g.bucket.figuresIn(&slab, &fills, names, !q.TotalsOnlyLists)})
			g.total.mergeAcc(g.bucket)
			g.bucket.reset()
		}
	}
	if len(groups) == 0 && q.Split == SplitNone {
		g := &group{total: newAcc(len(names))}
		for _, start := range starts {
			g.buckets = append(g.buckets, Bucket{Start: dayStart(start), End: dayStart(q.Granularity.next(start))})
		}
		groups[""] = g
	}
	keys := sortedKeys(groups)
	rep := Report{From: dayStart(from), To: dayStart(to), Granularity: q.Granularity, Position: a.pos, SeriesTotal: len(keys)}
	total := newAcc(len(names))
	for _, gk := range keys {
		total.mergeAcc(groups[gk].total)
	}
	if q.Top > 0 && len(keys) > q.Top {
		// The busiest first, then by key; the kept ones in key order.
		slices.SortStableFunc(keys, func(a, b string) int {
			return cmp.Compare(groups[b].total.c.decisions(), groups[a].total.c.decisions())
		})
		keys = keys[:q.Top]
		slices.Sort(keys)
	}
	for _, gk := range keys {
		g := groups[gk]
		s := Series{Buckets: g.buckets, Totals: g.total.figures(names)}
		switch q.Split {
		case SplitAgent:
			s.Agent = gk
		case SplitGate:
			s.Gate = gk
		}
		rep.Series = append(rep.Series, s)
	}
	rep.Totals = total.figures(names)
	return rep, nil
}

// bounds checks a query and returns its range in days, [from, to).
func (a *Aggregate) bounds(q Query) (from, to int32, err error) {
	switch q.Granularity {
	case 0, Day, Week, Month:
	default:
		return 0, 0, precept.Errorf(precept.Invalid, "granularity: must be day, week or month")
	}
	switch q.Split {
	case SplitNone, SplitAgent, SplitGate:
	default:
		return 0, 0, precept.Errorf(precept.Invalid, "split: must be none, agent or gate")
	}
	if len(q.Agents) > maxFilter || len(q.Gates) > maxFilter {
		return 0, 0, precept.Errorf(precept.Invalid, "agents, gates: at most %d each", maxFilter)
	}
	for _, names := range [][]string{q.Agents, q.Gates} {
		for _, n := range names {
			if n == "" || len(n) > 128 {
				return 0, 0, precept.Errorf(precept.Invalid, "agents, gates: names must be 1-128 bytes")
			}
		}
	}
	toT, fromT := q.To, q.From
	if toT.IsZero() {
		toT = dayStart(dayOf(a.opts.Now()) + 1)
	}
	if fromT.IsZero() {
		fromT = toT.Add(-30 * 24 * time.Hour)
	}
	if !fromT.Before(toT) {
		return 0, 0, precept.Errorf(precept.Invalid, "from (%s) must be before to (%s)", fromT.UTC().Format(time.RFC3339), toT.UTC().Format(time.RFC3339))
	}
	if fromT.Year() < 2000 || toT.Year() > 9999 {
		return 0, 0, precept.Errorf(precept.Invalid, "from and to must lie between the year 2000 and 9999")
	}
	if days := toT.Sub(fromT).Hours() / 24; days > float64(a.opts.MaxRangeDays) {
		return 0, 0, precept.Errorf(precept.Invalid, "range of %.0f days is longer than the limit of %d days; narrow from and to", days, a.opts.MaxRangeDays)
	}
	from = dayOf(fromT)
	to = dayOf(toT)
	if !dayStart(to).Equal(toT.UTC()) {
		to++
	}
	return from, to, nil
}

func set(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string])
	return keys
}
