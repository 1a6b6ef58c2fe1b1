package console

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// drawAll builds every analytics chart from in and returns each one's
// inline SVG and PNG.
func drawAll(t *testing.T, in *analyticsInput) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, ch := range analyticsCharts {
		f, err := ch.build(in)
		if err != nil {
			t.Fatal(err)
		}
		png, err := f.png()
		if err != nil {
			t.Fatal(err)
		}
		out[ch.name+".svg"], out[ch.name+".png"] = []byte(f.SVG), png
	}
	return out
}

func cachedInput(t *testing.T, cache *drawCache, filters analyticsFilters, all, split *preceptv1.GetAnalyticsResponse) *analyticsInput {
	t.Helper()
	in := &analyticsInput{filters: filters, all: all, split: split, cache: cache}
	var err error
	if in.key, err = dataDigest(filters.query(), all, split); err != nil {
		t.Fatal(err)
	}
	return in
}

// Charts are kept drawn under a digest of their data: the same data
// draws from cache exactly what a fresh drawing gives, and any change
// to the data, the filters or the split draws anew.
func TestAnalyticsChartsAreKeptDrawnUnderADigestOfTheirData(t *testing.T) {
	var cache drawCache
	filters := analyticsFilters{From: "2026-09-01", To: "2026-10-01", By: "day"}
	all := syntheticAnalytics(30)
	fresh := drawAll(t, &analyticsInput{filters: filters, all: all})
	first := drawAll(t, cachedInput(t, &cache, filters, all, nil))
	kept := len(cache.m)
	if kept != 2*len(analyticsCharts) {
		t.Fatalf("%d drawings kept, want %d", kept, 2*len(analyticsCharts))
	}
	// A decision stored elsewhere (another agent, another day) moves the
	// position and changes no figure: nothing is drawn anew.
	moved := proto.Clone(all).(*preceptv1.GetAnalyticsResponse)
	moved.Position = all.GetPosition() + 7
	again := drawAll(t, cachedInput(t, &cache, filters, moved, nil))
	if len(cache.m) != kept {
		t.Fatalf("equal figures drew anew: %d drawings kept, want %d", len(cache.m), kept)
	}
	if moved.GetPosition() != all.GetPosition()+7 {
		t.Fatal("the digest changed the response's position")
	}
	for name, want := range fresh {
		if !bytes.Equal(first[name], want) || !bytes.Equal(again[name], want) {
			t.Errorf("%s from cache differs from a fresh drawing", name)
		}
	}

	// One more approval on one day changes the acceptance chart.
	changed := proto.Clone(all).(*preceptv1.GetAnalyticsResponse)
	changed.Series[0].Buckets[3].Figures.FirstPassAccepted++
	changed.Series[0].Buckets[3].Figures.FirstPassAcceptance += 0.25
	got := drawAll(t, cachedInput(t, &cache, filters, changed, nil))
	if bytes.Equal(got["acceptance.svg"], first["acceptance.svg"]) || bytes.Equal(got["acceptance.png"], first["acceptance.png"]) {
		t.Error("the acceptance chart was served from cache after its data changed")
	}
	for _, tc := range []struct {
		name    string
		filters analyticsFilters
		split   *preceptv1.GetAnalyticsResponse
	}{
		{"other filters", analyticsFilters{From: "2026-09-01", To: "2026-10-01", By: "day", Agent: "agent-1"}, nil},
		{"a split", analyticsFilters{From: "2026-09-01", To: "2026-10-01", By: "day", Split: "agent"}, syntheticAnalytics(30, "agent-1", "agent-2")},
	} {
		before := len(cache.m)
		drawAll(t, cachedInput(t, &cache, tc.filters, all, tc.split))
		if len(cache.m) != before+2*len(analyticsCharts) {
			t.Errorf("%s: %d new drawings, want %d", tc.name, len(cache.m)-before, 2*len(analyticsCharts))
		}
	}
}

func TestDrawCacheStaysWithinItsBound(t *testing.T) {
	var cache drawCache
	chunk := make([]byte, maxDrawCache/8)
	for i := range 50 {
		cache.put(fmt.Sprint(i), chunk)
		if cache.size > maxDrawCache {
			t.Fatalf("after %d puts the cache holds %d bytes", i+1, cache.size)
		}
	}
	cache.put("huge", make([]byte, maxDrawCache/2))
	if _, ok := cache.get("huge"); ok {
		t.Error("a drawing larger than a quarter of the cache was kept")
	}
}

// A rule's effect chart is kept under the figures it draws: computing
// them again draws nothing new, a new recurrence draws anew.
func TestEffectChartsAreKeptUnderTheFiguresTheyDraw(t *testing.T) {
	var cache drawCache
	e := &preceptv1.RuleEffect{RuleId: "r-tests", BeforeDecisions: 10, BeforeRecurrences: 4, RateBefore: 0.4,
		RateBeforeInterval: &preceptv1.Interval{Low: 0.17, High: 0.69}, Exposures: 12, Recurrences: 1, RateAfter: 1.0 / 12,
		RateAfterInterval: &preceptv1.Interval{Low: 0.01, High: 0.35}, Validations: 3, ComputedAt: timestamppb.Now()}
	draw := func(e *preceptv1.RuleEffect) []byte {
		t.Helper()
		f, err := ruleEffectFigure(e, &cache)
		if err != nil {
			t.Fatal(err)
		}
		png, err := f.png()
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(f.SVG), png...)
	}
	first := draw(e)
	again := proto.Clone(e).(*preceptv1.RuleEffect)
	again.ComputedAt = timestamppb.New(time.Now().Add(time.Hour))
	if got := draw(again); !bytes.Equal(got, first) || len(cache.m) != 2 {
		t.Fatalf("the same figures computed later: %d drawings kept, equal %v", len(cache.m), bytes.Equal(got, first))
	}
	more := proto.Clone(e).(*preceptv1.RuleEffect)
	more.Recurrences, more.RateAfter = 2, 2.0/12
	if got := draw(more); bytes.Equal(got, first) || len(cache.m) != 4 {
		t.Fatalf("a new recurrence: %d drawings kept, equal %v", len(cache.m), bytes.Equal(got, first))
	}
	fresh, err := ruleEffectFigure(more, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(fresh.SVG) != string(draw(more)[:len(fresh.SVG)]) {
		t.Error("the cached effect chart differs from a fresh drawing")
	}
}

// A page figure kept in cache is what building it gives: the same
// drawing and data table, the second time without building anything.
func TestPageFiguresKeptInCacheAreWhatBuildingGives(t *testing.T) {
	var cache drawCache
	filters := analyticsFilters{From: "2026-09-01", To: "2026-11-29", By: "day", Split: "agent"}
	all, split := syntheticAnalytics(90), syntheticAnalytics(90, "agent-1", "agent-2", "agent-3")
	for _, ch := range analyticsCharts {
		built, err := ch.build(&analyticsInput{filters: filters, all: all, split: split})
		if err != nil {
			t.Fatal(err)
		}
		in := cachedInput(t, &cache, filters, all, split)
		first, err := in.pageFigure(ch)
		if err != nil {
			t.Fatal(err)
		}
		kept := len(cache.figs)
		again, err := cachedInput(t, &cache, filters, all, split).pageFigure(ch)
		if err != nil {
			t.Fatal(err)
		}
		if len(cache.figs) != kept {
			t.Fatalf("%s: the same data built the page figure again", ch.name)
		}
		for name, f := range map[string]figure{"first": first, "again": again} {
			if f.SVG != built.SVG || f.Body() != built.Body() || f.Desc != built.Desc || f.Export != built.Export || !slices.Equal(f.Header, built.Header) {
				t.Errorf("%s, %s: the kept page figure differs from a built one", ch.name, name)
			}
		}
		if built.Body() == "" || len(built.Rows) == 0 {
			t.Fatalf("%s: the synthetic data draws an empty table", ch.name)
		}
	}
}
