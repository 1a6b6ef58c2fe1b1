package console

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// render writes a diff as the page's <pre> shows it, one line each.
func renderDiff(lines []diffLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text)
		b.WriteString("\n")
	}
	return b.String()
}

func TestLineDiffMarksRemovedAndAddedLines(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"same", "a\nb\n", "a\nb\n", "… 2 unchanged lines …\n"},
		{"added at the end", "a\nb\n", "a\nb\nc\n", "  a\n  b\n+ c\n"},
		{"removed in the middle", "a\nb\nc\n", "a\nc\n", "  a\n- b\n  c\n"},
		{"changed", "a\nb\nc\n", "a\nB\nc\n", "  a\n- b\n+ B\n  c\n"},
		{"a last line without a newline equals one with", "a\nb", "a\nb\nc\n", "  a\n  b\n+ c\n"},
		{"from nothing", "", "a\nb\n", "+ a\n+ b\n"},
		{"to nothing", "a\n", "", "- a\n"},
		{"moved", "a\nb\nc\n", "b\nc\na\n", "- a\n  b\n  c\n+ a\n"},
		{"blank lines count", "a\n\nb\n", "a\nb\n", "  a\n- \n  b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, cut := lineDiff(tc.from, tc.to)
			if got := renderDiff(lines); got != tc.want || cut {
				t.Errorf("lineDiff(%q, %q) =\n%s(cut %v), want\n%s", tc.from, tc.to, got, cut, tc.want)
			}
		})
	}
}

func TestLineDiffShortensLongUnchangedRuns(t *testing.T) {
	var from, to strings.Builder
	for i := range 20 {
		fmt.Fprintf(&from, "line %d\n", i)
		if i == 10 {
			to.WriteString("inserted\n")
		}
		fmt.Fprintf(&to, "line %d\n", i)
	}
	lines, _ := lineDiff(from.String(), to.String())
	want := "… 7 unchanged lines …\n  line 7\n  line 8\n  line 9\n+ inserted\n  line 10\n  line 11\n  line 12\n… 7 unchanged lines …\n"
	if got := renderDiff(lines); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if lines[0].Kind != "skip" || lines[4].Kind != "ins" {
		t.Errorf("kinds: %+v", lines)
	}

	// Runs between two changes keep context on both sides; short ones
	// stay whole.
	lines, _ = lineDiff("x\na\nb\nc\nd\ne\nf\ng\nh\ny\n", "X\na\nb\nc\nd\ne\nf\ng\nh\nY\n")
	want = "- x\n+ X\n  a\n  b\n  c\n… 2 unchanged lines …\n  f\n  g\n  h\n- y\n+ Y\n"
	if got := renderDiff(lines); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	lines, _ = lineDiff("x\na\nb\nc\nd\ne\nf\ng\ny\n", "X\na\nb\nc\nd\ne\nf\ng\nY\n")
	if got := renderDiff(lines); strings.Contains(got, "unchanged") {
		t.Errorf("a run of 7 lines between changes was shortened:\n%s", got)
	}
}

func TestLineDiffIsBoundedOnUnrelatedTexts(t *testing.T) {
	var from, to strings.Builder
	for i := range maxDiffLines + 500 {
		fmt.Fprintf(&from, "old line %d\n", i)
		fmt.Fprintf(&to, "new line %d\n", i)
	}
	start := time.Now()
	lines, cut := lineDiff(from.String(), to.String())
	took := time.Since(start)
	if !cut {
		t.Error("texts longer than maxDiffLines were not cut")
	}
	dels, inss := 0, 0
	for _, l := range lines {
		switch l.Kind {
		case "del":
			dels++
		case "ins":
			inss++
		}
	}
	if dels != maxDiffLines || inss != maxDiffLines {
		t.Errorf("%d deleted and %d inserted lines, want %d each", dels, inss, maxDiffLines)
	}
	if took > 10*diffTimeout {
		t.Errorf("two unrelated texts of %d lines took %s to diff", maxDiffLines, took)
	}
	t.Logf("two unrelated texts of %d lines diffed in %s", maxDiffLines, took)

	// Long versions of one prompt differ in a few lines: the diff is
	// exact.
	long := from.String()
	changed := strings.Replace(long, "old line 2000\n", "old line 2000, changed\n", 1)
	lines, _ = lineDiff(long, changed)
	if got := renderDiff(lines); !strings.Contains(got, "- old line 2000\n+ old line 2000, changed\n") || strings.Count(got, "\n") != 2*diffContext+4 {
		t.Errorf("one changed line of %d:\n%s", maxDiffLines, got)
	}
}

func TestCompareVersionsNamesRulesAddedRemovedAndMoved(t *testing.T) {
	rec := func(version string, ids []string, files ...string) versionRecord {
		return versionRecord{Version: version, RuleIDs: ids, RulesFiles: files, BasePrompt: "prompts/implement.md", BaseDigest: "b1"}
	}
	for _, tc := range []struct {
		name                  string
		from, to              versionRecord
		added, removed, moved string
		filesAdded, filesGone string
		base                  bool
	}{
		{name: "one rule added on top shifts the others but moves none",
			from: rec("v1", []string{"a", "b", "c"}), to: rec("v2", []string{"n", "a", "b", "c"}),
			added: "n@0>1"},
		{name: "one rule removed",
			from: rec("v1", []string{"a", "b", "c"}), to: rec("v2", []string{"a", "c"}),
			removed: "b@2>0"},
		{name: "the last rule moved first: only it moved",
			from: rec("v1", []string{"a", "b", "c", "d"}), to: rec("v2", []string{"d", "a", "b", "c"}),
			moved: "d@4>1"},
		{name: "two swapped",
			from: rec("v1", []string{"a", "b"}), to: rec("v2", []string{"b", "a"}),
			moved: "a@1>2"},
		{name: "files and base",
			from: rec("v1", nil, "prompts/_rules.md"), to: versionRecord{Version: "v2", RulesFiles: []string{"prompts/src/_rules.md"}, BasePrompt: "request", BaseDigest: "sha256:x"},
			filesAdded: "prompts/src/_rules.md", filesGone: "prompts/_rules.md", base: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := compareVersions(tc.from, tc.to)
			changes := func(cs []ruleChange) string {
				var out []string
				for _, c := range cs {
					out = append(out, fmt.Sprintf("%s@%d>%d", c.ID, c.From, c.To))
				}
				return strings.Join(out, ",")
			}
			if got := changes(d.Added); got != tc.added {
				t.Errorf("added %q, want %q", got, tc.added)
			}
			if got := changes(d.Removed); got != tc.removed {
				t.Errorf("removed %q, want %q", got, tc.removed)
			}
			if got := changes(d.Moved); got != tc.moved {
				t.Errorf("moved %q, want %q", got, tc.moved)
			}
			if got := strings.Join(d.FilesAdded, ","); got != tc.filesAdded {
				t.Errorf("files added %q, want %q", got, tc.filesAdded)
			}
			if got := strings.Join(d.FilesRemoved, ","); got != tc.filesGone {
				t.Errorf("files removed %q, want %q", got, tc.filesGone)
			}
			if d.BaseChanged != tc.base || d.Same {
				t.Errorf("base changed %v, same %v", d.BaseChanged, d.Same)
			}
		})
	}
}
