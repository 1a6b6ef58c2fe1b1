package evalrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/precept-dev/precept/evaluator"
)

// records are made-up comments in the shape of gathered ones: two
// recurring themes over several threads, a one-off, a vague rejection,
// an approval, and a duplicate text.
func records() []RealRecord {
	var out []RealRecord
	for i := range 8 {
		out = append(out, RealRecord{
			RealLabels: RealLabels{Source: fmt.Sprintf("https://example.com/o/r/pull/%d", i), Thread: fmt.Sprintf("o/r#%d", i%4),
				Gate: "code-review", Decision: "REJECTED", Kind: KindRecurring, Theme: "missing-tests", Category: "tests-missing"},
			Reviewer: fmt.Sprintf("reviewer%d", i%5),
			Text:     fmt.Sprintf("Please add a unit test for case %d before this goes in.", i),
		})
	}
	for i := range 2 {
		out = append(out, RealRecord{
			RealLabels: RealLabels{Source: "https://example.com/o/d/pull/9", Thread: "o/d#9", Gate: "design-review",
				Decision: "REJECTED", Kind: KindRecurring, Theme: "design-rollback-plan", Category: "requirements-missed"},
			Reviewer: "designer",
			Text:     fmt.Sprintf("How do we roll this back if step %d fails?", i),
		})
	}
	one := func(n int, reviewer, decision, kind, theme, category, text string) RealRecord {
		return RealRecord{RealLabels: RealLabels{Source: fmt.Sprintf("https://example.com/o/r/pull/%d", n), Thread: fmt.Sprintf("o/r#%d", n),
			Decision: decision, Kind: kind, Theme: theme, Category: category}, Reviewer: reviewer, Text: text}
	}
	out = append(out,
		one(20, "x", "REJECTED", KindOneOff, "wrong-port", "hardcoded-config", "The port should come from the config file."),
		one(21, "y", "REJECTED", KindVague, "vague-01", "unclear", "nah"),
		one(22, "z", "APPROVED", KindApproval, "approval", "positive", "Thanks, LGTM!"),
		one(23, "z", "APPROVED", KindApproval, "approval", "positive", "Thanks, LGTM!"),
	)
	return out
}

func TestTheRealSetIsSplitByThreadAndLabelledWithinEachSplit(t *testing.T) {
	cache := t.TempDir()
	entries, err := BuildReal(records(), cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 13 {
		t.Fatalf("%d entries, want 13 (the duplicate approval dropped)", len(entries))
	}
	splitOf := map[string]string{}
	perSplit := map[string]int{}
	for _, e := range entries {
		if s, ok := splitOf[e.Thread]; ok && s != e.Split && e.Kind == KindRecurring {
			t.Fatalf("thread %s is in both splits", e.Thread)
		}
		splitOf[e.Thread] = e.Split
		if e.Theme == "missing-tests" {
			perSplit[e.Split]++
			if e.Class != string(evaluator.GeneralizableHigh) {
				t.Errorf("%s of missing-tests in %s: class %s, want HIGH", e.ID, e.Split, e.Class)
			}
		}
		if strings.Contains(e.Reviewer, "reviewer") {
			t.Fatalf("the reviewer's login reached the manifest: %s", e.Reviewer)
		}
		want := map[string]evaluator.Class{KindOneOff: evaluator.EdgeCase, KindVague: evaluator.Ambiguous, KindApproval: evaluator.Positive}[e.Kind]
		if e.Theme == "design-rollback-plan" {
			// Two comments by one reviewer in one thread: no support.
			want = evaluator.EdgeCase
		}
		if want != "" && e.Class != string(want) {
			t.Errorf("%s (%s, %s): class %s, want %s", e.ID, e.Kind, e.Theme, e.Class, want)
		}
		if b, err := os.ReadFile(filepath.Join(cache, e.SHA256+".txt")); err != nil || len(b) == 0 {
			t.Fatalf("cache lacks %s: %v", e.ID, err)
		}
	}
	if perSplit[SplitTune] != 4 || perSplit[SplitHeldout] != 4 {
		t.Fatalf("missing-tests dealt %v, want 4 and 4", perSplit)
	}
}

func TestTheRealSetIsReadOnlyWithItsWholeUntamperedCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	entries, err := BuildReal(records(), cache)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		lines = append(lines, fmt.Sprintf(`{"id":%q,"source":%q,"thread":%q,"reviewer":%q,"gate":%q,"decision":%q,"kind":%q,"theme":%q,"category":%q,"expected_class":%q,"split":%q,"sha256":%q}`,
			e.ID, e.Source, e.Thread, e.Reviewer, e.Gate, e.Decision, e.Kind, e.Theme, e.Category, e.Class, e.Split, e.SHA256))
	}
	manifest := filepath.Join(dir, "manifest.jsonl")
	os.WriteFile(manifest, []byte(strings.Join(lines, "\n")+"\n"), 0o644)

	splits, err := LoadReal(manifest, cache)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(splits[SplitTune]) + len(splits[SplitHeldout]); n != len(entries) {
		t.Fatalf("loaded %d of %d", n, len(entries))
	}
	if _, err := LoadReal(manifest, filepath.Join(dir, "absent")); !errors.Is(err, ErrNoRealCache) {
		t.Fatalf("no cache: %v, want ErrNoRealCache", err)
	}
	os.Remove(filepath.Join(cache, entries[0].SHA256+".txt"))
	if _, err := LoadReal(manifest, cache); err == nil || errors.Is(err, ErrNoRealCache) || !strings.Contains(err.Error(), "1 missing") {
		t.Fatalf("one text missing: %v", err)
	}
	os.WriteFile(filepath.Join(cache, entries[0].SHA256+".txt"), []byte("changed"), 0o644)
	if _, err := LoadReal(manifest, cache); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("a changed text: %v", err)
	}
}

func TestThemesCountRecurringThemesAndFalsePatterns(t *testing.T) {
	item := func(kind, theme, reviewer, thread string) RealItem {
		return RealItem{Entry: RealEntry{RealLabels: RealLabels{Kind: kind, Theme: theme, Thread: thread}, Reviewer: reviewer}}
	}
	items := []RealItem{
		item(KindRecurring, "a", "r1", "t1"), item(KindRecurring, "a", "r2", "t2"), item(KindRecurring, "a", "r3", "t2"),
		item(KindRecurring, "b", "r1", "t1"), item(KindRecurring, "b", "r2", "t2"), item(KindRecurring, "b", "r3", "t3"),
		item(KindOneOff, "x", "r4", "t4"), item(KindApproval, "positive", "r5", "t5"),
		// Too little support to count as a theme.
		item(KindRecurring, "c", "r1", "t1"), item(KindRecurring, "c", "r1", "t1"),
	}
	high := evaluator.GeneralizableHigh
	evals := []evaluator.Evaluation{
		{Class: high, ClusterID: "c1"}, {Class: high, ClusterID: "c1"}, {Class: high, ClusterID: "c1"},
		{Class: high, ClusterID: "c2"}, {Class: evaluator.EdgeCase, ClusterID: "c3"}, {Class: high, ClusterID: "c2"},
		{Class: evaluator.GeneralizableLow, ClusterID: "c9"}, {Class: evaluator.GeneralizableLow, ClusterID: "c9"},
		{Class: evaluator.EdgeCase}, {Class: evaluator.EdgeCase},
	}
	r := Themes(items, evals)
	if r.Themes != 2 || r.Yielding != 1 || len(r.Missed) != 1 || r.Missed[0] != "b" {
		t.Fatalf("themes %+v, want 2 counted, a yielding, b missed", r)
	}
	if len(r.FalsePatterns) != 1 || r.FalsePatterns[0] != "c9" {
		t.Fatalf("false patterns %v, want [c9]", r.FalsePatterns)
	}
}

// TestTheCommittedManifestHoldsNoTextAndSplitsByThread reads the
// manifest in the repository (its texts are not there): every entry
// well-formed, at least 300, each thread of a theme in one split only,
// every source an address.
func TestTheCommittedManifestHoldsNoTextAndSplitsByThread(t *testing.T) {
	entries, err := ReadManifest("../../testdata/real/manifest.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 300 {
		t.Fatalf("%d entries, want at least 300", len(entries))
	}
	where := map[[2]string]string{}
	splits := map[string]int{}
	for _, e := range entries {
		splits[e.Split]++
		if !strings.HasPrefix(e.Source, "https://") {
			t.Errorf("%s: source %q is not an address", e.ID, e.Source)
		}
		if e.ID != "real-"+e.SHA256[:12] {
			t.Errorf("%s: id does not follow its text's SHA-256", e.ID)
		}
		k := [2]string{e.Kind + "/" + e.Theme, e.Thread}
		if s, ok := where[k]; ok && s != e.Split {
			t.Errorf("thread %s of %s is in both splits", e.Thread, e.Theme)
		}
		where[k] = e.Split
	}
	if splits[SplitTune] == 0 || splits[SplitHeldout] == 0 {
		t.Fatalf("splits %v", splits)
	}
}
