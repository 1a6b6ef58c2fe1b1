package console

import (
	"encoding/xml"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// A line diff of two long prompts must reproduce both texts exactly:
// the deleted and unchanged lines are the old text, the inserted and
// unchanged lines the new one.
func TestLineDiffReproducesLongTexts(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var a, b []string
	for i := range 3000 {
		l := fmt.Sprintf("rule %d: %d", i, rng.Intn(1000))
		a = append(a, l)
		if i%3 == 0 {
			b = append(b, l+" changed")
		} else {
			b = append(b, l)
		}
	}
	from, to := strings.Join(a, "\n")+"\n", strings.Join(b, "\n")+"\n"
	lines, cut := lineDiff(from, to)
	if cut {
		t.Fatal("cut")
	}
	var old, nu []string
	for _, l := range lines {
		switch l.Kind {
		case "skip":
			t.Fatalf("unexpected skip %q", l.Text)
		case "del":
			old = append(old, l.Text[2:])
		case "ins":
			nu = append(nu, l.Text[2:])
		case "same":
			old = append(old, l.Text[2:])
			nu = append(nu, l.Text[2:])
		}
	}
	if got := strings.Join(old, "\n") + "\n"; got != from {
		t.Errorf("old side differs (%d lines, want %d)", len(old), len(a))
	}
	if got := strings.Join(nu, "\n") + "\n"; got != to {
		t.Errorf("new side differs (%d lines, want %d)", len(nu), len(b))
	}
}

// Labels with quotes, angle brackets and " style=" must not produce
// markup or attributes in the inlined SVG.
func TestChartLabelsCannotInjectAttributes(t *testing.T) {
	hostile := []string{`" style="x`, `<script>alert(1)</script>`, ` style="fill:url(javascript:alert(1))"`, "a\" onload=\"alert(1)"}
	p, err := horizontalBars(`t" onload="x`, `x<y`, hostile, []float64{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	f, err := newFigure("id", `T"<`, `D"<`, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(f.SVG)
	for _, bad := range []string{"<script", "onload=", "javascript:", ` style="`} {
		for i := strings.Index(s, bad); i >= 0; {
			t.Logf("%q in context %q", bad, s[max(0, i-60):min(len(s), i+40)])
			j := strings.Index(s[i+1:], bad)
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	// Parse as XML: no element other than svg's own, no on* attribute.
	dec := xml.NewDecoder(strings.NewReader(s))
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local == "script" {
				t.Errorf("script element")
			}
			for _, a := range se.Attr {
				if strings.HasPrefix(a.Name.Local, "on") || strings.Contains(a.Value, "javascript") {
					t.Errorf("attribute %s=%q on %s", a.Name.Local, a.Value, se.Name.Local)
				}
			}
		}
	}
}

func TestCSVDefusesFormulaVariants(t *testing.T) {
	for _, s := range []string{"=1+1", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1)", "\t=1", "\r=1", "-Inf", "-NaN", "+Inf", "-0x1p-2"} {
		got := csvCell(s)
		t.Logf("%q -> %q", s, got)
	}
}

// All-zero values with a legend (legendRoom divides a zero maximum) and
// NaN rates must still draw.
func TestChartsWithDegenerateValues(t *testing.T) {
	periods := []string{"01-01", "01-02"}
	for name, ss := range map[string][]series{
		"zeros": {{Name: "a", Y: []float64{0, 0}, Has: []bool{true, true}}, {Name: "b", Y: []float64{0, 0}, Has: []bool{true, true}}},
		"nan":   {{Name: "a", Y: []float64{math.NaN(), 1}, Has: []bool{true, true}}},
		"inf":   {{Name: "a", Y: []float64{math.Inf(1), 1}, Has: []bool{true, true}}},
	} {
		p, err := lineChart("t", "y", periods, ss, 0, nil)
		if err != nil {
			t.Errorf("%s: lineChart: %v", name, err)
			continue
		}
		if _, err := newFigure("x", "t", "d", p, nil, nil); err != nil {
			t.Errorf("%s: draw: %v", name, err)
		}
	}
}
