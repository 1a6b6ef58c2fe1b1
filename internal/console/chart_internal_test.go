package console

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"fmt"
	"gonum.org/v1/plot"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// hostile are labels that would break out of the SVG, or an attribute
// in it, if drawn unescaped.
var hostile = []string{`<script>x</script>`, `"&'`, `]]></svg><img src=x onerror=alert(1)>`}

func hostileFigure(t testing.TB) figure {
	t.Helper()
	periods := []string{"11-01", "11-02", "11-03", "11-04"}
	p, err := lineChart(hostile[0], hostile[1], periods, []series{
		{Name: hostile[0], Y: []float64{0.5, 0.6, 0, 0.9}, Has: []bool{true, true, false, true}},
		{Name: hostile[1], Y: []float64{0.2, 0.3, 0.4, 0.1}, Has: []bool{true, true, true, true}},
		{Name: hostile[2], Y: []float64{0.7, 0.7, 0.7, 0.7}, Has: []bool{true, true, true, true}},
	}, 1, rateTicks)
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFigure(`fig"1`, "Title "+hostile[0], "Desc "+hostile[1], p, []string{"period", "series", "rate"},
		[][]string{{"11-01", hostile[0], "0.5"}, {"11-02", "=1+1", "-0.25"}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// svgText is what an SVG says: its elements and their text, parsed.
type svgText struct {
	elements []string
	text     []string
	styled   []string
}

func parseSVG(t *testing.T, data []byte) svgText {
	t.Helper()
	var out svgText
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, data)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			out.elements = append(out.elements, tok.Name.Local)
			for _, a := range tok.Attr {
				if a.Name.Local == "style" {
					out.styled = append(out.styled, tok.Name.Local)
				}
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				out.text = append(out.text, s)
			}
		}
	}
}

func TestChartSVGEscapesLabelsAndHasNoStyleAttributes(t *testing.T) {
	f := hostileFigure(t)
	svg := parseSVG(t, []byte(f.SVG))
	for _, e := range svg.elements {
		if e == "script" || e == "img" {
			t.Errorf("a label became a <%s> element", e)
		}
	}
	if len(svg.styled) > 0 {
		t.Errorf("elements with style attributes, refused by style-src 'self': %v", svg.styled)
	}
	// Each label survives as text, exactly as given.
	for _, want := range append(hostile, "Title "+hostile[0], "Desc "+hostile[1]) {
		found := false
		for _, s := range svg.text {
			found = found || s == want
		}
		if !found {
			t.Errorf("no text %q in the SVG; text: %q", want, svg.text)
		}
	}
	for _, want := range []string{`role="img"`, `aria-labelledby="fig&#34;1-title fig&#34;1-desc"`, `<title id="fig&#34;1-title">`, `stroke-dasharray=`} {
		if !strings.Contains(string(f.SVG), want) {
			t.Errorf("the SVG lacks %s", want)
		}
	}
	if strings.Contains(string(f.SVG), "<?xml") {
		t.Error("the inline SVG has an XML prolog")
	}
}

// TestSeriesDifferWithoutColour: every series of a chart has its own
// dashes and its own marker, so that it reads in grey.
func TestSeriesDifferWithoutColour(t *testing.T) {
	dashes, shapes := map[string]int{}, map[string]int{}
	for i := range maxLines {
		line, glyph := seriesStyle(i)
		d, g := fmt.Sprint(line.Dashes), fmt.Sprintf("%T", glyph.Shape)
		if j, ok := dashes[d]; ok {
			t.Errorf("series %d has the dashes of series %d: %s", i, j, d)
		}
		if j, ok := shapes[g]; ok {
			t.Errorf("series %d has the marker of series %d: %s", i, j, g)
		}
		dashes[d], shapes[g] = i, i
	}
}

func TestChartCSVDefusesFormulasButNotNumbers(t *testing.T) {
	f := hostileFigure(t)
	data, err := f.csv()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"period", "series", "rate"}, {"11-01", hostile[0], "0.5"}, {"11-02", "'=1+1", "-0.25"}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("CSV:\n got %q\nwant %q", rows, want)
	}
	for _, tc := range []struct{ in, want string }{
		{"=cmd|'/C calc'!A0", "'=cmd|'/C calc'!A0"}, {"+1", "+1"}, {"+x", "'+x"}, {"-x", "'-x"},
		{"@SUM(A1)", "'@SUM(A1)"}, {"\tx", "'\tx"}, {"\rx", "'\rx"}, {"-0.5", "-0.5"}, {"naming", "naming"}, {"", ""},
	} {
		if got := csvCell(tc.in); got != tc.want {
			t.Errorf("csvCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestServeFigureAnswersEachFormatAsAFile(t *testing.T) {
	f := hostileFigure(t)
	c := &Console{}
	for _, tc := range []struct{ format, ctype string }{{"svg", "image/svg+xml"}, {"png", "image/png"}, {"csv", "text/csv; charset=utf-8; header=present"}} {
		w := httptest.NewRecorder()
		if err := c.serveFigure(w, httptest.NewRequest("GET", "/x?format="+tc.format, nil), f, `a b/"c`); err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if got := w.Header().Get("Content-Type"); got != tc.ctype {
			t.Errorf("%s: Content-Type %q", tc.format, got)
		}
		if got, want := w.Header().Get("Content-Disposition"), `attachment; filename="a_b__c.`+tc.format+`"`; got != want {
			t.Errorf("%s: Content-Disposition %q, want %q", tc.format, got, want)
		}
		switch tc.format {
		case "svg":
			if !strings.HasPrefix(w.Body.String(), `<?xml version="1.0" encoding="UTF-8"?>`+"\n<svg ") {
				t.Errorf("SVG file starts %q", w.Body.String()[:80])
			}
			parseSVG(t, w.Body.Bytes())
		case "png":
			img, err := png.Decode(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() != chartWidth*pngDPI/72 || b.Dy() != chartHeight*pngDPI/72 {
				t.Errorf("PNG is %v", b)
			}
		}
	}
	err := c.serveFigure(httptest.NewRecorder(), httptest.NewRequest("GET", "/x?format=pdf", nil), f, "x")
	var pe *pageError
	if !errors.As(err, &pe) || pe.status != http.StatusBadRequest {
		t.Errorf("format=pdf: %v, want a 400", err)
	}
}

func TestExportURLAddsTheFormatToItsQuery(t *testing.T) {
	for _, tc := range []struct{ export, want string }{
		{"/ui/rules/r-1/effect", "/ui/rules/r-1/effect?format=png"},
		{"/ui/analytics/verdicts?by=day", "/ui/analytics/verdicts?by=day&format=png"},
	} {
		if got := (figure{Export: tc.export}).ExportURL("png"); got != tc.want {
			t.Errorf("ExportURL of %q = %q, want %q", tc.export, got, tc.want)
		}
	}
}

func TestRuleEffectFigure(t *testing.T) {
	e := &preceptv1.RuleEffect{RuleId: "r-tests", BeforeDecisions: 10, BeforeRecurrences: 4, RateBefore: 0.4,
		RateBeforeInterval: &preceptv1.Interval{Low: 0.168, High: 0.687}, Exposures: 20, Recurrences: 2, RateAfter: 0.1,
		RateAfterInterval: &preceptv1.Interval{Low: 0.028, High: 0.301}, Validations: 7}
	f, err := ruleEffectFigure(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := [][]string{
		{"before activation", "10", "4", "0.4000", "0.1680", "0.6870", ""},
		{"with the rule", "20", "2", "0.1000", "0.0280", "0.3010", "7"},
	}
	if !reflect.DeepEqual(f.Rows, wantRows) {
		t.Errorf("rows:\n got %q\nwant %q", f.Rows, wantRows)
	}
	if want := "Share of decisions in the failure pattern: 40.0% (95% interval 16.8%–68.7%) of 10 decisions before activation; 10.0% (95% interval 2.8%–30.1%) of 20 exposures with the rule; 7 validations."; f.Desc != want {
		t.Errorf("desc:\n got %q\nwant %q", f.Desc, want)
	}
	if f.Export != "/ui/rules/r-tests/effect" {
		t.Errorf("export %q", f.Export)
	}
	// Two whiskers with caps: three paths each, drawn in the data colour.
	if n := strings.Count(string(f.SVG), `stroke="#0072B2"`); n < 6 {
		t.Errorf("%d strokes in the data colour, want the two intervals with their caps:\n%s", n, f.SVG)
	}

	// No evidence yet: an empty chart that says so, not an error.
	f, err = ruleEffectFigure(&preceptv1.RuleEffect{RuleId: "r-new"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svg := parseSVG(t, []byte(f.SVG))
	for _, want := range []string{"no exposures yet", "no decisions before"} {
		if !strings.Contains(strings.Join(svg.text, "|"), want) {
			t.Errorf("the empty effect chart does not say %q: %q", want, svg.text)
		}
	}
	if !strings.HasPrefix(f.Desc, "No evidence yet: the rule has no exposures.") {
		t.Errorf("desc %q", f.Desc)
	}
	if _, err := f.png(); err != nil {
		t.Errorf("empty chart as PNG: %v", err)
	}
}

// TestEveryChartKindDrawsWithoutData: empty ranges draw a chart that
// says so.
func TestEveryChartKindDrawsWithoutData(t *testing.T) {
	for name, build := range map[string]func() error{
		"line": func() error { _, err := lineChart("t", "y", nil, nil, 0, nil); return err },
		"stacked": func() error {
			_, err := stackedBars("t", "y", []string{"a"}, []series{{Name: "s", Y: []float64{0}}})
			return err
		},
		"horizontal": func() error { _, err := horizontalBars("t", "x", nil, nil); return err },
	} {
		if err := build(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	p, _ := horizontalBars("t", "x", nil, nil)
	f, err := newFigure("e", "t", "d", p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`>No categories in this range</text>`).MatchString(string(f.SVG)) {
		t.Errorf("empty chart does not say so:\n%s", f.SVG)
	}
}

func BenchmarkChartSVG(b *testing.B) {
	f := hostileFigure(b)
	for b.Loop() {
		if _, err := f.svg(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChartPNG draws each analytics chart over 90 days as a PNG,
// without the cache: what a PNG export costs the first time its data
// is asked for.
func BenchmarkChartPNG(b *testing.B) {
	in := &analyticsInput{filters: analyticsFilters{From: "2026-09-01", To: "2026-11-29", By: "day"}, all: syntheticAnalytics(90)}
	for _, ch := range analyticsCharts {
		f, err := ch.build(in)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(ch.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := f.png(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The data table's rows are written in Go: every cell is escaped, the
// first of a row is its header, and no rows say so across every column.
func TestFigureBodyEscapesEveryCell(t *testing.T) {
	f := figure{Header: []string{"period", "agent", "rate"}, Rows: [][]string{
		{"2026-11-01", hostile[0], "12.5%"},
		{hostile[1], hostile[2], `x" onmouseover="alert(1)`},
	}}
	body := string(f.Body())
	for _, h := range append(hostile, `onmouseover="`) {
		if strings.Contains(body, h) {
			t.Errorf("the table holds %q unescaped:\n%s", h, body)
		}
	}
	want := `<tr><th scope="row">2026-11-01</th><td>&lt;script&gt;x&lt;/script&gt;</td><td>12.5%</td></tr>`
	if !strings.Contains(body, want) || strings.Count(body, "<tr>") != 2 || strings.Count(body, `<th scope="row">`) != 2 {
		t.Errorf("table body:\n%s\nwant a row like\n%s", body, want)
	}
	if got := string((figure{Header: []string{"a", "b"}}).Body()); got != `<tr><td colspan="2">No data in this range.</td></tr>` {
		t.Errorf("empty table body: %s", got)
	}
}

// newFigure draws p as the inline SVG of a figure.
func newFigure(id, title, desc string, p *plot.Plot, header []string, rows [][]string) (figure, error) {
	return figure{ID: id, Title: title, Desc: desc, Header: header, Rows: rows, plot: p}.drawn()
}
