package console

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"connectrpc.com/connect"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// ruleEffectChart serves a rule's effect chart as SVG or PNG and its
// figures as CSV (GET /ui/rules/{id}/effect?format=...).
func (c *Console) ruleEffectChart(w http.ResponseWriter, r *http.Request, q *request) error {
	id := r.PathValue("id")
	if f := r.URL.Query().Get("format"); f != "svg" && f != "png" && f != "csv" {
		return invalidArgument("format must be svg, png or csv, got %q", f)
	}
	resp, err := c.rpc.effects.GetRuleEffect(q.ctx, connect.NewRequest(&preceptv1.GetRuleEffectRequest{RuleId: id}))
	if err != nil {
		return err
	}
	f, err := ruleEffectFigure(resp.Msg.GetEffect(), &c.draws)
	if err != nil {
		return err
	}
	return c.serveFigure(w, r, f, id+"-effect")
}

// ruleEffectFigure is a rule's effect (docs/effects.md): the share of
// decisions in the failure pattern the rule targets before it was
// activated and with it in the prompt, each with its 95% interval.
// Its drawings are kept in cache under the figures they show.
func ruleEffectFigure(e *preceptv1.RuleEffect, cache *drawCache) (figure, error) {
	before, after := e.GetBeforeDecisions(), e.GetExposures()
	p := newPlot("Failure pattern recurrence", "", "recurrence rate")
	p.NominalX("before activation", "with the rule")
	p.X.Min, p.X.Max = -0.5, 1.5
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = rateTicks

	var pts rateWhiskers
	if before > 0 {
		pts.add(0, e.GetRateBefore(), e.GetRateBeforeInterval())
	}
	if after > 0 {
		pts.add(1, e.GetRateAfter(), e.GetRateAfterInterval())
	}
	if len(pts.xys) > 0 {
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return figure{}, fmt.Errorf("effect chart of %s: %w", e.GetRuleId(), err)
		}
		bars.LineStyle = draw.LineStyle{Color: palette[0], Width: vg.Points(1.5)}
		bars.CapWidth = vg.Points(14)
		sc, err := plotter.NewScatter(pts.xys)
		if err != nil {
			return figure{}, fmt.Errorf("effect chart of %s: %w", e.GetRuleId(), err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: palette[0], Radius: vg.Points(4), Shape: draw.CircleGlyph{}}
		p.Add(bars, sc)
	}
	// Say what is missing where its point would be.
	var notes plotter.XYLabels
	if before == 0 {
		notes.XYs = append(notes.XYs, plotter.XY{X: 0, Y: 0.5})
		notes.Labels = append(notes.Labels, "no decisions before")
	}
	if after == 0 {
		notes.XYs = append(notes.XYs, plotter.XY{X: 1, Y: 0.5})
		notes.Labels = append(notes.Labels, "no exposures yet")
	}
	if len(notes.XYs) > 0 {
		l, err := plotter.NewLabels(notes)
		if err != nil {
			return figure{}, fmt.Errorf("effect chart of %s: %w", e.GetRuleId(), err)
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font = font.From(chartFont, 11)
			l.TextStyle[i].XAlign = draw.XCenter
		}
		p.Add(l)
	}

	header := []string{"period", "decisions", "recurrences", "rate", "interval_low", "interval_high", "validations"}
	rows := [][]string{
		{"before activation", itoa(before), itoa(e.GetBeforeRecurrences()), rateCell(before, e.GetRateBefore()),
			rateCell(before, e.GetRateBeforeInterval().GetLow()), rateCell(before, e.GetRateBeforeInterval().GetHigh()), ""},
		{"with the rule", itoa(after), itoa(e.GetRecurrences()), rateCell(after, e.GetRateAfter()),
			rateCell(after, e.GetRateAfterInterval().GetLow()), rateCell(after, e.GetRateAfterInterval().GetHigh()), itoa(e.GetValidations())},
	}
	f := figure{ID: "effect", Title: "Effect of rule " + e.GetRuleId(), Desc: effectDesc(e), Header: header, Rows: rows, plot: p,
		key: effectKey(e), cache: cache}
	f, err := f.drawn()
	if err != nil {
		return figure{}, err
	}
	f.Export = "/ui/rules/" + url.PathEscape(e.GetRuleId()) + "/effect"
	return f, nil
}

// effectKey names the effect chart's drawings in cache: a digest of
// exactly the figures it draws and states (not when they were computed).
func effectKey(e *preceptv1.RuleEffect) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "effect\x00%q %d %d %d %d %v %v %v %v %v %v %d", e.GetRuleId(),
		e.GetBeforeDecisions(), e.GetBeforeRecurrences(), e.GetExposures(), e.GetRecurrences(),
		e.GetRateBefore(), e.GetRateBeforeInterval().GetLow(), e.GetRateBeforeInterval().GetHigh(),
		e.GetRateAfter(), e.GetRateAfterInterval().GetLow(), e.GetRateAfterInterval().GetHigh(), e.GetValidations()))
	return hex.EncodeToString(sum[:])
}

// effectDesc is the effect chart in one sentence.
func effectDesc(e *preceptv1.RuleEffect) string {
	before, after := e.GetBeforeDecisions(), e.GetExposures()
	side := func(n int64, what string, rate float64, iv *preceptv1.Interval) string {
		if n == 0 {
			return "no " + what
		}
		return fmt.Sprintf("%s (95%% interval %s–%s) of %d %s", percent(rate), percent(iv.GetLow()), percent(iv.GetHigh()), n, what)
	}
	s := "Share of decisions in the failure pattern: " +
		side(before, "decisions before activation", e.GetRateBefore(), e.GetRateBeforeInterval()) + "; " +
		side(after, "exposures with the rule", e.GetRateAfter(), e.GetRateAfterInterval()) +
		fmt.Sprintf("; %d validations.", e.GetValidations())
	if after == 0 {
		s = "No evidence yet: the rule has no exposures. " + s
	}
	return s
}

// rateWhiskers are points with their interval, for plotter.YErrorBars.
type rateWhiskers struct {
	xys  plotter.XYs
	errs plotter.YErrors
}

func (w *rateWhiskers) add(x, rate float64, iv *preceptv1.Interval) {
	low, high := iv.GetLow(), iv.GetHigh()
	if iv == nil || low > rate || high < rate {
		low, high = rate, rate
	}
	w.xys = append(w.xys, plotter.XY{X: x, Y: rate})
	w.errs = append(w.errs, struct{ Low, High float64 }{Low: rate - low, High: high - rate})
}

func (w rateWhiskers) Len() int                        { return len(w.xys) }
func (w rateWhiskers) XY(i int) (float64, float64)     { return w.xys[i].X, w.xys[i].Y }
func (w rateWhiskers) YError(i int) (float64, float64) { return w.errs[i].Low, w.errs[i].High }

// rateTicks label a rate axis in percent.
var rateTicks = plot.ConstantTicks{
	{Value: 0, Label: "0%"}, {Value: 0.25, Label: "25%"}, {Value: 0.5, Label: "50%"},
	{Value: 0.75, Label: "75%"}, {Value: 1, Label: "100%"},
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// percent shows a rate in words.
func percent(r float64) string { return strconv.FormatFloat(r*100, 'f', 1, 64) + "%" }

// rateCell is a rate in the data, empty when there was nothing to count.
func rateCell(n int64, r float64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatFloat(r, 'f', 4, 64)
}
