package console

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"html/template"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// figure is a chart with its text alternative and its data
// (docs/console.md, "Charts"): the page shows the SVG inline, a caption
// and the data as a table; Export is the URL that serves the chart as
// SVG or PNG and the data as CSV (serveFigure).
type figure struct {
	// ID is the figure's element id, unique in its page; it names the
	// downloaded files too.
	ID    string
	Title string
	// Desc says in one sentence what the chart shows, for those who
	// cannot see it.
	Desc string
	// SVG is the chart, ready to inline: presentation attributes instead
	// of style="", labelled by its title and description.
	SVG template.HTML
	// Header and Rows are the chart's data.
	Header []string
	Rows   [][]string
	// Export is the URL of the chart without its format; it may already
	// have a query.
	Export string

	// plot draws the chart again for the PNG.
	plot *plot.Plot
	// key names the figure's data in cache (a digest); drawings of a
	// figure with no key or no cache are not kept.
	key   string
	cache *drawCache
	// body is the data table's rows written once (Body), for a figure
	// kept in cache without its rows.
	body template.HTML
}

// Body is the data table's rows as HTML: the first cell of a row is its
// header (th scope="row"), every cell escaped. It is written here rather
// than in the template: a 90-day split holds over a thousand cells, and
// the template's per-cell escaping was two thirds of the page's time
// (docs/console.md, "Performance").
func (f figure) Body() template.HTML {
	if f.body != "" {
		return f.body
	}
	if len(f.Rows) == 0 {
		return template.HTML(`<tr><td colspan="` + strconv.Itoa(len(f.Header)) + `">No data in this range.</td></tr>`)
	}
	var b strings.Builder
	for _, row := range f.Rows {
		b.WriteString("<tr>")
		for i, cell := range row {
			if i == 0 {
				b.WriteString(`<th scope="row">`)
				b.WriteString(template.HTMLEscapeString(cell))
				b.WriteString("</th>")
				continue
			}
			b.WriteString("<td>")
			b.WriteString(template.HTMLEscapeString(cell))
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
	}
	return template.HTML(b.String())
}

// ExportURL is Export with format added to its query.
func (f figure) ExportURL(format string) string {
	sep := "?"
	if strings.Contains(f.Export, "?") {
		sep = "&"
	}
	return f.Export + sep + "format=" + format
}

// The size of a chart in points (SVG user units, CSS pixels when inlined
// at full size). Small enough that a 390 px screen, which scales the
// chart to its width, still shows the tick labels at about 9 px.
const (
	chartWidth  = 440
	chartHeight = 260
	// pngDPI draws the PNG at one and a half times the size in pixels
	// (a point is a pixel at 72 dpi), 660 by 390: sharper than the page
	// on dense screens, and drawn in under 25 ms (BenchmarkChartPNG; at
	// twice the size it took 25–50 ms).
	pngDPI = 108
)

// chartFont is the face labels are measured with; browsers draw the
// inline SVG in their own sans-serif.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// palette tells series apart by colour for those who see it
// (Okabe–Ito, safe for the common colour-vision deficiencies); dashes
// and markers (seriesStyle) tell them apart without colour.
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xB2, 0xff}, // blue
	color.RGBA{0xD5, 0x5E, 0x00, 0xff}, // vermilion
	color.RGBA{0x00, 0x9E, 0x73, 0xff}, // bluish green
	color.RGBA{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	color.RGBA{0xE6, 0x9F, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
}

// dashes and glyphs are the patterns of series 0, 1, 2...
var (
	dashes = [][]vg.Length{
		nil,
		{vg.Points(6), vg.Points(3)},
		{vg.Points(2), vg.Points(2)},
		{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)},
		{vg.Points(12), vg.Points(4)},
		{vg.Points(4), vg.Points(2), vg.Points(4), vg.Points(6)},
		{vg.Points(1), vg.Points(4)},
	}
	glyphs = []draw.GlyphDrawer{
		draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
		draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{},
	}
)

// seriesStyle is the line and marker of the i-th series.
func seriesStyle(i int) (draw.LineStyle, draw.GlyphStyle) {
	c := palette[i%len(palette)]
	line := draw.LineStyle{Color: c, Width: vg.Points(1.5), Dashes: dashes[i%len(dashes)]}
	glyph := draw.GlyphStyle{Color: c, Radius: vg.Points(3), Shape: glyphs[i%len(glyphs)]}
	return line, glyph
}

// fills are the bars of a stacked chart: far apart in lightness, so
// they differ in grey as well as in colour.
var fills = []color.Color{
	color.RGBA{0x00, 0x3F, 0x6B, 0xff}, // dark blue
	color.RGBA{0xE6, 0x9F, 0x00, 0xff}, // orange
	color.RGBA{0xBF, 0xDF, 0xF2, 0xff}, // pale blue
}

// newPlot is a plot with the console's fonts.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(chartFont, 13)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(chartFont, 12)
		a.Tick.Label.Font = font.From(chartFont, 11)
	}
	p.Legend.TextStyle.Font = font.From(chartFont, 11)
	p.Legend.Top = true
	return p
}

// drawn draws the figure's inline SVG.
func (f figure) drawn() (figure, error) {
	svg, err := f.svg()
	if err != nil {
		return figure{}, err
	}
	f.SVG = template.HTML(svg)
	return f, nil
}

// svg draws the figure's chart as an <svg> element, with no XML prolog
// so that it can go inline in HTML as well as into a file.
func (f figure) svg() ([]byte, error) {
	return f.cache.drawn(f.cacheKey("svg"), f.drawSVG)
}

// cacheKey is the figure's key in cache for a format, or "".
func (f figure) cacheKey(format string) string {
	if f.key == "" {
		return ""
	}
	return f.key + "/" + f.ID + "." + format
}

func (f figure) drawSVG() ([]byte, error) {
	c := vgsvg.New(chartWidth, chartHeight)
	if err := drawPlot(f.plot, draw.New(c)); err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	if _, err := c.WriteTo(&raw); err != nil {
		return nil, fmt.Errorf("draw chart %s: %w", f.ID, err)
	}
	return inlineSVG(raw.Bytes(), f.ID, f.Title, f.Desc)
}

// png draws the figure's chart as a PNG.
func (f figure) png() ([]byte, error) {
	return f.cache.drawn(f.cacheKey("png"), f.drawPNG)
}

func (f figure) drawPNG() ([]byte, error) {
	c := vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(pngDPI), vgimg.UseBackgroundColor(color.White))
	if err := drawPlot(f.plot, draw.New(c)); err != nil {
		return nil, err
	}
	// Fastest compression: a chart's flat colours compress well anyway
	// (about 5% larger than the default level), in three quarters of
	// the time.
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, c.Image()); err != nil {
		return nil, fmt.Errorf("draw chart %s: %w", f.ID, err)
	}
	// A copy the size of the PNG: the buffer grew by doubling, and the
	// cache counts what it keeps by length.
	return bytes.Clone(buf.Bytes()), nil
}

// drawPlot draws p, turning a panic of the drawing code (gonum/plot
// panics on some impossible layouts) into an error: a chart must not
// take the page down.
func drawPlot(p *plot.Plot, c draw.Canvas) (err error) {
	if p == nil {
		return fmt.Errorf("draw chart: no plot")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("draw chart: %v", r)
		}
	}()
	p.Draw(c)
	return nil
}

// svgOpen is the opening tag gonum's SVG canvas writes, with what comes
// before it (the XML prolog and a comment).
var svgOpen = regexp.MustCompile(`(?s)\A.*?<svg\b[^>]*>`)

// styleAttr starts a style="" attribute. The canvas escapes the text it
// draws (html.EscapeString turns " into &#34;), so it cannot occur inside
// a label.
var styleAttr = []byte(`style="`)

// presentation are the properties gonum writes in style="" that SVG also
// takes as presentation attributes; anything else is dropped.
var presentation = map[string]bool{
	"fill": true, "fill-opacity": true, "stroke": true, "stroke-opacity": true,
	"stroke-width": true, "stroke-dasharray": true, "stroke-dashoffset": true,
	"stroke-linecap": true, "stroke-linejoin": true, "opacity": true,
	"font-family": true, "font-size": true, "font-style": true, "font-weight": true,
	"font-variant": true,
}

// inlineSVG makes gonum's SVG fit to inline under the console's
// Content-Security-Policy (style-src 'self' refuses style="" attributes,
// so each becomes presentation attributes) and labels it for assistive
// technology: role="img" and a <title> and <desc> it is labelled by.
func inlineSVG(raw []byte, id, title, desc string) ([]byte, error) {
	loc := svgOpen.FindIndex(raw)
	if loc == nil {
		return nil, fmt.Errorf("draw chart %s: no <svg> element in the canvas output", id)
	}
	body := presentationAttrs(raw[loc[1]:])
	var b bytes.Buffer
	b.Grow(len(body) + 1024)
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title %s-desc">`,
		chartWidth, chartHeight, chartWidth, chartHeight, esc(id), esc(id))
	fmt.Fprintf(&b, "\n<title id=\"%s-title\">%s</title>\n<desc id=\"%s-desc\">%s</desc>\n", esc(id), esc(title), esc(id), esc(desc))
	// A white ground, so that the downloaded file reads on a dark viewer.
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, chartHeight)
	b.Write(body)
	return b.Bytes(), nil
}

// presentationAttrs rewrites every style="a:b;c:d" in svg as a="b" c="d".
// A chart repeats a handful of styles hundreds of times, so each is
// rewritten once.
func presentationAttrs(svg []byte) []byte {
	out := make([]byte, 0, len(svg))
	done := map[string][]byte{}
	for {
		i := bytes.Index(svg, styleAttr)
		if i < 0 {
			return append(out, svg...)
		}
		start := i + len(styleAttr)
		if i == 0 || !isSpace(svg[i-1]) {
			// Part of another name (font-style="").
			out = append(out, svg[:start]...)
			svg = svg[start:]
			continue
		}
		n := bytes.IndexByte(svg[start:], '"')
		if n < 0 {
			return append(out, svg...)
		}
		decl := string(svg[start : start+n])
		attrs, ok := done[decl]
		if !ok {
			attrs = styleToAttrs(decl)
			done[decl] = attrs
		}
		out = append(append(out, svg[:i]...), attrs...)
		svg = svg[start+n+1:]
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// styleToAttrs turns CSS declarations into presentation attributes,
// keeping only the properties SVG takes as such.
func styleToAttrs(decl string) []byte {
	var out []byte
	for d := range strings.SplitSeq(decl, ";") {
		k, v, ok := strings.Cut(d, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !presentation[k] || strings.ContainsAny(v, `"<>&`) {
			continue
		}
		if k == "font-family" {
			// Browsers without the face the labels were measured with
			// use one of about the same width.
			v += ", Arial, Helvetica, sans-serif"
		}
		if len(out) > 0 {
			out = append(out, ' ')
		}
		out = append(out, k+`="`+v+`"`...)
	}
	return out
}

// formulaStarts are the characters that make a spreadsheet read a cell
// as a formula (or, tab and carriage return, hide one); the same set as
// `precept export` defuses.
const formulaStarts = "=+-@\t\r"

// csvCell defuses a cell a spreadsheet would run: text starting with a
// formula character gets a leading apostrophe. Numbers (-0.5) are
// numbers to a spreadsheet, not formulas, and stay as they are.
func csvCell(s string) string {
	if s == "" || !strings.ContainsRune(formulaStarts, rune(s[0])) {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s
	}
	return "'" + s
}

// csv writes the figure's data as RFC 4180 CSV with its header.
func (f figure) csv() ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.UseCRLF = true
	row := make([]string, len(f.Header))
	for i, h := range f.Header {
		row[i] = csvCell(h)
	}
	w.Write(row)
	for _, r := range f.Rows {
		row = row[:0]
		for _, c := range r {
			row = append(row, csvCell(c))
		}
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("write chart data %s: %w", f.ID, err)
	}
	return buf.Bytes(), nil
}

// serveFigure answers an export link: ?format=svg, png or csv, as a file
// named name.svg (.png, .csv).
func (c *Console) serveFigure(w http.ResponseWriter, r *http.Request, f figure, name string) error {
	var (
		data  []byte
		ctype string
		err   error
	)
	format := r.URL.Query().Get("format")
	switch format {
	case "svg":
		ctype = "image/svg+xml"
		if data, err = f.svg(); err == nil {
			data = append([]byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"), data...)
		}
	case "png":
		ctype = "image/png"
		data, err = f.png()
	case "csv":
		ctype = "text/csv; charset=utf-8; header=present"
		data, err = f.csv()
	default:
		return invalidArgument("format must be svg, png or csv, got %q", format)
	}
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, fileName(name), format))
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
	return nil
}

// fileName keeps the characters a download's name may safely have.
func fileName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "chart"
	}
	return string(b)
}

// noData marks a chart that has nothing to show: a sentence in the
// middle of the plot area, which spans [0, 1] on both axes.
func noData(p *plot.Plot, msg string) error {
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: 0.5, Y: 0.5}}, Labels: []string{msg}})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Font = font.From(chartFont, 12)
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].YAlign = draw.YCenter
	}
	p.Add(l)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	return nil
}

// series is one line of a chart over periods: Y[i] is its value in
// period i, shown only where Has[i] (a period with nothing to measure
// is a gap, not a zero).
type series struct {
	Name string
	Y    []float64
	Has  []bool
}

// periodTicks labels the x axis of a chart over periods with at most
// about eight of the periods' names.
func periodTicks(p *plot.Plot, names []string) {
	step := (len(names) + 7) / 8
	if step < 1 {
		step = 1
	}
	ticks := make([]plot.Tick, 0, len(names))
	for i, n := range names {
		t := plot.Tick{Value: float64(i)}
		if i%step == 0 {
			t.Label = n
		}
		ticks = append(ticks, t)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
}

// lineChart draws series over periods, each with its own dashes and
// markers. yMax > 0 fixes the y axis to [0, yMax] (rates); otherwise it
// starts at 0 and fits the data.
func lineChart(title, yLabel string, periods []string, ss []series, yMax float64, yTicks plot.Ticker) (*plot.Plot, error) {
	p := newPlot(title, "", yLabel)
	drawn, legend := 0, 0
	for i, s := range ss {
		var xys plotter.XYs
		for j, y := range s.Y {
			// A figure that is not a number is a gap, as a missing one is.
			if j < len(s.Has) && s.Has[j] && !math.IsNaN(y) && !math.IsInf(y, 0) {
				xys = append(xys, plotter.XY{X: float64(j), Y: y})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		sc, err := plotter.NewScatter(markerPoints(xys))
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		l.LineStyle, sc.GlyphStyle = seriesStyle(i)
		p.Add(l, sc)
		if len(ss) > 1 || s.Name != "" {
			p.Legend.Add(s.Name, l, sc)
			legend++
		}
		drawn++
	}
	if drawn == 0 || len(periods) == 0 {
		return p, noData(p, "No decisions to measure in this range")
	}
	periodTicks(p, periods)
	p.Y.Min = 0
	if yMax > 0 {
		p.Y.Max = yMax
	}
	if legend > 0 {
		legendRoom(p, legend)
	}
	if yTicks != nil {
		p.Y.Tick.Marker = yTicks
	}
	return p, nil
}

// maxMarkers is about the most markers a line gets: enough to tell it
// from the others, few enough not to hide it (and to draw quickly; each
// marker is an SVG path).
const maxMarkers = 16

// markerPoints are the points of a line that get a marker: all of them,
// or every k-th and the last on a long line.
func markerPoints(xys plotter.XYs) plotter.XYs {
	if len(xys) <= maxMarkers {
		return xys
	}
	step := (len(xys) + maxMarkers - 1) / maxMarkers
	out := make(plotter.XYs, 0, maxMarkers+1)
	for i := 0; i < len(xys); i += step {
		out = append(out, xys[i])
	}
	if last := xys[len(xys)-1]; out[len(out)-1] != last {
		out = append(out, last)
	}
	return out
}

// stackedBars draws, per period, one bar made of the stacks' values.
func stackedBars(title, yLabel string, periods []string, stacks []series) (*plot.Plot, error) {
	p := newPlot(title, "", yLabel)
	total := 0.0
	for _, s := range stacks {
		for _, y := range s.Y {
			total += y
		}
	}
	if total == 0 || len(periods) == 0 {
		return p, noData(p, "No decisions in this range")
	}
	// Bars fill about 70 % of their period's width on the canvas.
	width := vg.Points(0.7 * (chartWidth - 60) / float64(len(periods)))
	var below *plotter.BarChart
	for i, s := range stacks {
		b, err := plotter.NewBarChart(plotter.Values(s.Y), width)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		b.Color = fills[i%len(fills)]
		b.LineStyle = draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}
		if below != nil {
			b.StackOn(below)
		}
		p.Add(b)
		p.Legend.Add(s.Name, b)
		below = b
	}
	periodTicks(p, periods)
	p.Y.Min = 0
	legendRoom(p, len(stacks))
	return p, nil
}

// legendRoom raises the top of the y axis so that a legend of n entries
// in the top right corner does not cover the data.
func legendRoom(p *plot.Plot, n int) {
	// An entry takes about 14 points of the plot area's ~200.
	share := min(0.5, float64(n)*14/(chartHeight-60))
	p.Y.Max /= 1 - share
}

// horizontalBars draws one bar per name, the first at the top.
func horizontalBars(title, xLabel string, names []string, values []float64) (*plot.Plot, error) {
	p := newPlot(title, xLabel, "")
	if len(names) == 0 {
		return p, noData(p, "No categories in this range")
	}
	// Top to bottom: gonum counts y upwards.
	rev := make(plotter.Values, len(values))
	labels := make([]string, len(names))
	for i := range values {
		rev[len(values)-1-i] = values[i]
		labels[len(names)-1-i] = names[i]
	}
	// Thick enough to read, thin enough not to look like a block.
	width := vg.Points(min(22, 0.6*(chartHeight-60)/float64(len(names))))
	b, err := plotter.NewBarChart(rev, width)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", title, err)
	}
	b.Horizontal = true
	b.Color = fills[0]
	b.LineStyle.Width = 0
	p.Add(b)
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(names))-0.5
	p.X.Min = 0
	return p, nil
}
