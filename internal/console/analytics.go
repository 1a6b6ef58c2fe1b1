package console

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"gonum.org/v1/plot"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/text"
)

// analyticsFilters are the analytics page's filters as the visitor gave
// them, defaults filled in (docs/console.md, "Analytics").
type analyticsFilters struct {
	Agent, Gate string
	// From and To are UTC dates, both included.
	From, To string
	// By is the bucket: day, week or month.
	By string
	// Split draws one line per agent or gate: "", "agent" or "gate".
	Split string
}

// analyticsDays is the default range, ending today.
const analyticsDays = 30

var granularities = map[string]preceptv1.AnalyticsGranularity{
	"day":   preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_DAY,
	"week":  preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_WEEK,
	"month": preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_MONTH,
}

var splits = map[string]preceptv1.AnalyticsSplit{
	"":      preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_UNSPECIFIED,
	"agent": preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_AGENT,
	"gate":  preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_GATE,
}

// parseAnalyticsFilters reads the filters of a page or export URL; a bad
// one is an invalid argument naming its field.
func parseAnalyticsFilters(v url.Values, now time.Time) (analyticsFilters, *preceptv1.GetAnalyticsRequest, error) {
	f := analyticsFilters{
		Agent: strings.TrimSpace(v.Get("agent")),
		Gate:  strings.TrimSpace(v.Get("gate")),
		By:    strings.TrimSpace(v.Get("by")),
		Split: strings.TrimSpace(v.Get("split")),
	}
	if f.By == "" {
		f.By = "day"
	}
	gran, ok := granularities[f.By]
	if !ok {
		return f, nil, invalidArgument("granularity: %q is not day, week or month", clip(f.By))
	}
	if f.Split == "none" {
		f.Split = ""
	}
	split, ok := splits[f.Split]
	if !ok {
		return f, nil, invalidArgument("split: %q is not agent or gate", clip(f.Split))
	}
	today := now.UTC().Truncate(24 * time.Hour)
	to, err := parseDay("to", v.Get("to"), today)
	if err != nil {
		return f, nil, err
	}
	from, err := parseDay("from", v.Get("from"), to.AddDate(0, 0, 1-analyticsDays))
	if err != nil {
		return f, nil, err
	}
	if from.After(to) {
		return f, nil, invalidArgument("from: %s is after to (%s)", from.Format(time.DateOnly), to.Format(time.DateOnly))
	}
	// A chart stays readable, and the page within its time budget, with
	// at most maxPeriods points a line.
	if gran == preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_DAY && to.Sub(from) >= maxDays*24*time.Hour {
		return f, nil, invalidArgument("by: day covers at most %d days; choose week or month for %s to %s", maxDays, from.Format(time.DateOnly), to.Format(time.DateOnly))
	}
	f.From, f.To = from.Format(time.DateOnly), to.Format(time.DateOnly)
	req := &preceptv1.GetAnalyticsRequest{
		From:        timestamppb.New(from),
		To:          timestamppb.New(to.AddDate(0, 0, 1)), // the last day is included
		Granularity: gran,
		Split:       split,
		// The charts draw rates and counts per period; the distributions
		// come from the totals.
		TotalsOnlyLists: true,
	}
	if f.Agent != "" {
		req.Agents = []string{f.Agent}
	}
	if f.Gate != "" {
		req.Gates = []string{f.Gate}
	}
	return f, req, nil
}

// parseDay reads a date field; empty means def.
// maxDays is the longest range shown by day (docs/console.md, "Analytics").
const maxDays = 92

func parseDay(field, s string, def time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return def, nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, invalidArgument("%s: %q is not a date (YYYY-MM-DD)", field, clip(s))
	}
	return t, nil
}

// query is the filters as a URL query, defaults included, so that an
// export link draws what the page shows even on another day.
func (f analyticsFilters) query() string {
	v := url.Values{}
	for k, s := range map[string]string{"agent": f.Agent, "gate": f.Gate, "from": f.From, "to": f.To, "by": f.By, "split": f.Split} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// analyticsInput is what the charts are drawn from: the figures over
// everything the filters keep, and per agent or gate when split.
type analyticsInput struct {
	filters analyticsFilters
	all     *preceptv1.GetAnalyticsResponse
	split   *preceptv1.GetAnalyticsResponse
	// key is the digest of the filters and the responses, under which
	// the charts are kept drawn in cache.
	key   string
	cache *drawCache
}

// analyticsChart is one chart of the page; split says it draws one line
// per agent or gate when the visitor asks for it.
type analyticsChart struct {
	name  string
	split bool
	build func(in *analyticsInput) (figure, error)
}

var analyticsCharts = []analyticsChart{
	{"acceptance", true, acceptanceFigure},
	{"verdicts", false, verdictsFigure},
	{"edits", true, editsFigure},
	{"durations", false, durationsFigure},
	{"categories", false, func(in *analyticsInput) (figure, error) {
		return categoryFigure(in, "categories", "Error categories", "error category", in.all.GetTotals().GetErrorCategories())
	}},
	{"lessons", false, func(in *analyticsInput) (figure, error) {
		return categoryFigure(in, "lessons", "Lesson categories", "lesson category", in.all.GetTotals().GetLessonCategories())
	}},
}

// analyticsData is the analytics page.
type analyticsData struct {
	Filters  analyticsFilters
	Totals   *preceptv1.AnalyticsFigures
	Figures  []figure
	Position uint64
}

// analyticsPage shows the figures of the decisions the filters keep:
// one GetAnalytics call, and one more per agent or gate when split.
func (c *Console) analyticsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	in, err := c.analytics(r, q, true)
	if err != nil {
		return err
	}
	d := analyticsData{Filters: in.filters, Totals: in.all.GetTotals(), Position: in.all.GetPosition()}
	for _, ch := range analyticsCharts {
		f, err := in.pageFigure(ch)
		if err != nil {
			return err
		}
		d.Figures = append(d.Figures, f)
	}
	c.render(w, r, http.StatusOK, "analytics", &view{Title: "Analytics", Nav: "analytics", Data: d, q: q})
	return nil
}

// pageFigure is a chart as the page shows it — drawn, its data table
// written — kept in cache under the data's digest without its plot and
// rows: a page over the same figures builds nothing again.
func (in *analyticsInput) pageFigure(ch analyticsChart) (figure, error) {
	key := ""
	if in.cache != nil && in.key != "" {
		key = in.key + "/" + ch.name + ".page"
		if f, ok := in.cache.getFigure(key); ok {
			return f, nil
		}
	}
	f, err := ch.build(in)
	if err != nil {
		return figure{}, err
	}
	f.body = f.Body()
	f.plot, f.Rows = nil, nil
	if key != "" {
		in.cache.putFigure(key, f)
	}
	return f, nil
}

// analyticsExport serves one chart of the page as SVG or PNG, or its
// data as CSV (GET /ui/analytics/{chart}?<filters>&format=...).
func (c *Console) analyticsExport(w http.ResponseWriter, r *http.Request, q *request) error {
	name := r.PathValue("chart")
	var ch *analyticsChart
	for i := range analyticsCharts {
		if analyticsCharts[i].name == name {
			ch = &analyticsCharts[i]
		}
	}
	if ch == nil {
		return notFound("there is no analytics chart named %q", clip(name))
	}
	if f := r.URL.Query().Get("format"); f != "svg" && f != "png" && f != "csv" {
		return invalidArgument("format must be svg, png or csv, got %q", clip(f))
	}
	in, err := c.analytics(r, q, ch.split)
	if err != nil {
		return err
	}
	f, err := ch.build(in)
	if err != nil {
		return err
	}
	return c.serveFigure(w, r, f, "analytics-"+name+"-"+in.filters.From+"-"+in.filters.To)
}

// analytics reads the filters and calls GetAnalytics, once more split
// when withSplit and the visitor asked for a split.
func (c *Console) analytics(r *http.Request, q *request, withSplit bool) (*analyticsInput, error) {
	filters, req, err := parseAnalyticsFilters(r.URL.Query(), c.opts.Now())
	if err != nil {
		return nil, err
	}
	split := req.Split
	req.Split = preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_UNSPECIFIED
	all, err := c.rpc.analytics.GetAnalytics(q.ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	in := &analyticsInput{filters: filters, all: all.Msg}
	if withSplit && split != preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_UNSPECIFIED {
		// Only the series drawn: a 90-day split per agent is 30 series of
		// 90 buckets, and the charts draw maxLines of them.
		req.Split, req.TopSeries = split, maxLines
		resp, err := c.rpc.analytics.GetAnalytics(q.ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		in.split = resp.Msg
	}
	in.key, err = dataDigest(filters.query(), in.all, in.split)
	if err != nil {
		return nil, err
	}
	in.cache = &c.draws
	return in, nil
}

// maxLines is the most series a chart draws: as many as it has dashes
// and markers to tell them apart. A split with more draws the agents or
// gates with the most decisions.
const maxLines = 7

// lines are the series a split chart draws: the unsplit one, or the
// busiest agents or gates.
func (in *analyticsInput) lines() (shown []*preceptv1.AnalyticsSeries, of int) {
	if in.split == nil {
		return in.all.GetSeries(), len(in.all.GetSeries())
	}
	all := append([]*preceptv1.AnalyticsSeries(nil), in.split.GetSeries()...)
	sort.SliceStable(all, func(i, j int) bool {
		return all[i].GetTotals().GetDecisions() > all[j].GetTotals().GetDecisions()
	})
	of = max(len(all), int(in.split.GetSeriesTotal()))
	if len(all) > maxLines {
		return all[:maxLines], of
	}
	return all, of
}

// seriesName names a series in a legend and the data.
func (in *analyticsInput) seriesName(s *preceptv1.AnalyticsSeries) string {
	switch in.filters.Split {
	case "agent":
		return s.GetAgent()
	case "gate":
		return s.GetGate()
	}
	return "all"
}

// periods are the buckets' names: the day they start, or the month.
func (in *analyticsInput) periods() (long, short []string) {
	var buckets []*preceptv1.AnalyticsBucket
	if ss := in.all.GetSeries(); len(ss) > 0 {
		buckets = ss[0].GetBuckets()
	}
	for _, b := range buckets {
		t := b.GetStart().AsTime().UTC()
		switch in.filters.By {
		case "month":
			long, short = append(long, t.Format("2006-01")), append(short, t.Format("2006-01"))
		default:
			long, short = append(long, t.Format(time.DateOnly)), append(short, t.Format("01-02"))
		}
	}
	return long, short
}

// splitNote says which lines a split chart leaves out.
func splitNote(shown, of int) string {
	if shown < of {
		return fmt.Sprintf(" Lines for the %d with the most decisions, of %d.", shown, of)
	}
	return ""
}

// perSeries draws one line per series of value, shown where has.
func (in *analyticsInput) perSeries(id, title, yLabel, desc string, yMax float64, ticks plot.Ticker, header []string,
	value func(*preceptv1.AnalyticsFigures) (float64, bool), cells func(*preceptv1.AnalyticsFigures) []string) (figure, error) {
	long, short := in.periods()
	shown, of := in.lines()
	var ss []series
	var rows [][]string
	for _, s := range shown {
		name := in.seriesName(s)
		l := series{Name: name, Y: make([]float64, len(long)), Has: make([]bool, len(long))}
		if in.split == nil {
			l.Name = ""
		}
		for i, b := range s.GetBuckets() {
			if i >= len(long) {
				break
			}
			l.Y[i], l.Has[i] = value(b.GetFigures())
			rows = append(rows, append([]string{long[i], name}, cells(b.GetFigures())...))
		}
		ss = append(ss, l)
	}
	p, err := lineChart(title, yLabel, short, ss, yMax, ticks)
	if err != nil {
		return figure{}, err
	}
	return in.figure(id, title, desc+splitNote(len(shown), of), p, header, rows)
}

// figure is newFigure with the export URL of the page's filters.
func (in *analyticsInput) figure(id, title, desc string, p *plot.Plot, header []string, rows [][]string) (figure, error) {
	f := figure{ID: id, Title: title, Desc: desc, Header: header, Rows: rows, plot: p, key: in.key, cache: in.cache}
	f, err := f.drawn()
	if err != nil {
		return figure{}, err
	}
	f.Export = "/ui/analytics/" + id + "?" + in.filters.query()
	return f, nil
}

func acceptanceFigure(in *analyticsInput) (figure, error) {
	t := in.all.GetTotals()
	desc := fmt.Sprintf("Share of first attempts approved without changes, per %s from %s to %s: %s of %s overall.",
		in.filters.By, in.filters.From, in.filters.To, percent(t.GetFirstPassAcceptance()), count(t.GetFirstAttempts(), "first attempt", "first attempts"))
	return in.perSeries("acceptance", "First-pass acceptance", "accepted first attempts", desc, 1, rateTicks,
		[]string{"period", "series", "first_attempts", "first_pass_accepted", "first_pass_acceptance"},
		func(f *preceptv1.AnalyticsFigures) (float64, bool) {
			return f.GetFirstPassAcceptance(), f.GetFirstAttempts() > 0
		},
		func(f *preceptv1.AnalyticsFigures) []string {
			return []string{itoa(f.GetFirstAttempts()), itoa(f.GetFirstPassAccepted()), rateCell(f.GetFirstAttempts(), f.GetFirstPassAcceptance())}
		})
}

func editsFigure(in *analyticsInput) (figure, error) {
	t := in.all.GetTotals()
	desc := fmt.Sprintf("Mean character edit distance between the agent's output and the approved output, per %s: %s over %s overall.",
		in.filters.By, strconv.FormatFloat(t.GetEditDistanceMeanPercent(), 'f', 1, 64)+"%", count(t.GetEditDistanceCount(), "decision", "decisions"))
	return in.perSeries("edits", "Edit distance", "mean edit distance (%)", desc, 0, nil,
		[]string{"period", "series", "decisions_with_outputs", "edit_distance_mean_percent"},
		func(f *preceptv1.AnalyticsFigures) (float64, bool) {
			return f.GetEditDistanceMeanPercent(), f.GetEditDistanceCount() > 0
		},
		func(f *preceptv1.AnalyticsFigures) []string {
			return []string{itoa(f.GetEditDistanceCount()), floatCell(f.GetEditDistanceCount(), f.GetEditDistanceMeanPercent())}
		})
}

func verdictsFigure(in *analyticsInput) (figure, error) {
	long, short := in.periods()
	names := []string{"approved", "approved with changes", "rejected"}
	stacks := make([]series, len(names))
	for i, n := range names {
		stacks[i] = series{Name: n, Y: make([]float64, len(long))}
	}
	var rows [][]string
	if ss := in.all.GetSeries(); len(ss) > 0 {
		for i, b := range ss[0].GetBuckets() {
			if i >= len(long) {
				break
			}
			f := b.GetFigures()
			stacks[0].Y[i], stacks[1].Y[i], stacks[2].Y[i] = float64(f.GetApproved()), float64(f.GetApprovedWithChanges()), float64(f.GetRejected())
			rows = append(rows, []string{long[i], itoa(f.GetApproved()), itoa(f.GetApprovedWithChanges()), itoa(f.GetRejected()), itoa(f.GetDecisions())})
		}
	}
	t := in.all.GetTotals()
	desc := fmt.Sprintf("Decisions per %s by verdict, stacked: %d in all, %d approved, %d approved with changes, %d rejected.",
		in.filters.By, t.GetDecisions(), t.GetApproved(), t.GetApprovedWithChanges(), t.GetRejected())
	p, err := stackedBars("Verdict mix", "decisions", short, stacks)
	if err != nil {
		return figure{}, err
	}
	return in.figure("verdicts", "Verdict mix", desc, p,
		[]string{"period", "approved", "approved_with_changes", "rejected", "decisions"}, rows)
}

func durationsFigure(in *analyticsInput) (figure, error) {
	long, short := in.periods()
	var buckets []*preceptv1.AnalyticsBucket
	if ss := in.all.GetSeries(); len(ss) > 0 {
		buckets = ss[0].GetBuckets()
	}
	// The unit that keeps the axis' numbers short.
	top := 0.0
	for _, b := range buckets {
		top = math.Max(top, b.GetFigures().GetReviewDurationP90Seconds())
	}
	unit, scale := "seconds", 1.0
	switch {
	case top >= 2*3600:
		unit, scale = "hours", 3600
	case top >= 120:
		unit, scale = "minutes", 60
	}
	p50 := series{Name: "p50 (median)", Y: make([]float64, len(long)), Has: make([]bool, len(long))}
	p90 := series{Name: "p90", Y: make([]float64, len(long)), Has: make([]bool, len(long))}
	var rows [][]string
	for i, b := range buckets {
		if i >= len(long) {
			break
		}
		f := b.GetFigures()
		n := f.GetReviewDurations()
		p50.Y[i], p50.Has[i] = f.GetReviewDurationP50Seconds()/scale, n > 0
		p90.Y[i], p90.Has[i] = f.GetReviewDurationP90Seconds()/scale, n > 0
		rows = append(rows, []string{long[i], itoa(n), floatCell(n, f.GetReviewDurationP50Seconds()), floatCell(n, f.GetReviewDurationP90Seconds())})
	}
	t := in.all.GetTotals()
	desc := fmt.Sprintf("Review duration per %s, median and 90th percentile: overall %s and %s over %s that reported one.",
		in.filters.By, seconds(t.GetReviewDurationP50Seconds()), seconds(t.GetReviewDurationP90Seconds()), count(t.GetReviewDurations(), "review", "reviews"))
	p, err := lineChart("Review duration", unit, short, []series{p50, p90}, 0, nil)
	if err != nil {
		return figure{}, err
	}
	return in.figure("durations", "Review duration", desc, p,
		[]string{"period", "reviews", "p50_seconds", "p90_seconds"}, rows)
}

// topCategories is how many categories a distribution chart shows.
const topCategories = 10

func categoryFigure(in *analyticsInput, id, title, what string, counts []*preceptv1.LabelCount) (figure, error) {
	shown := counts
	if len(shown) > topCategories {
		shown = shown[:topCategories]
	}
	names := make([]string, len(shown))
	values := make([]float64, len(shown))
	rows := make([][]string, len(shown))
	for i, c := range shown {
		names[i], values[i] = c.GetName(), float64(c.GetCount())
		rows[i] = []string{c.GetName(), itoa(c.GetCount())}
	}
	desc := fmt.Sprintf("Decisions per %s from %s to %s, most frequent first", what, in.filters.From, in.filters.To)
	switch {
	case len(counts) == 0:
		desc += ": none in this range."
	case len(counts) > len(shown):
		desc += fmt.Sprintf(": the top %d of %d, led by %s (%d).", len(shown), len(counts), names[0], shown[0].GetCount())
	default:
		desc += fmt.Sprintf(", led by %s (%d).", names[0], shown[0].GetCount())
	}
	p, err := horizontalBars(title, "decisions", names, values)
	if err != nil {
		return figure{}, err
	}
	return in.figure(id, title, desc, p, []string{strings.ReplaceAll(what, " ", "_"), "decisions"}, rows)
}

// floatCell is a mean or percentile in the data, empty when nothing was
// measured.
func floatCell(n int64, v float64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// count is n with its noun.
func count(n int64, one, many string) string {
	return itoa(n) + " " + text.Plural(int(n), one, many)
}

// seconds shows a duration given in seconds.
func seconds(s float64) string {
	return (time.Duration(math.Round(s)) * time.Second).String()
}
