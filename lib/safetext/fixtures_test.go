package safetext

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtibben/confusables"
	"github.com/precept-dev/precept/lib/testenv"
)

// fixtureTexts returns every reviewer comment and correction of the
// labelled feedback (testdata/feedback), and the clean texts of the
// corpus: ordinary text in several languages and code.
func fixtureTexts(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../testdata/feedback/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e struct {
				Comment string `json:"reviewer_comment"`
				Diff    string `json:"correction_diff"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{e.Comment, e.Diff} {
				if s != "" {
					out = append(out, s)
				}
			}
		}
	}
	for _, e := range testenv.UnsafeTexts(t) {
		if slices.Equal(e.Flags, []string{"clean"}) {
			out = append(out, e.Text)
		}
	}
	return out
}

// asWritten is the denylist as it matched before folding: the text as
// written, lower-cased, punctuation read as spaces.
func asWritten(s string) string {
	norm := normalizePhrase(s)
	for _, p := range builtinDenylist {
		if strings.Contains(norm, phraseForm(p)) {
			return p
		}
	}
	return ""
}

// TestFoldingFlagsNothingNewInOrdinaryText is the false-positive figure
// of docs/decisions/0010-text-safety.md: over the fixture feedback and
// the corpus's ordinary texts, the folded checks flag exactly what the
// checks of the text as written flagged.
func TestFoldingFlagsNothingNewInOrdinaryText(t *testing.T) {
	texts := fixtureTexts(t)
	var before, after, control int
	for _, s := range texts {
		old := asWritten(s) != "" || secretIn(s) != ""
		now := Denied(s, nil) != "" || Secret(s) != ""
		if old {
			before++
		}
		if now {
			after++
		}
		if old != now {
			t.Errorf("flagged %v as written, %v folded: %q (denylist %q, secret %q)", old, now, s, Denied(s, nil), Secret(s))
		}
		if r, _, bad := Control(s); bad && !strings.Contains(s, "\r") {
			control++
			t.Errorf("Control finds %U in ordinary text %q", r, s)
		}
	}
	t.Logf("%d ordinary texts: %d flagged as written, %d folded, %d with control characters", len(texts), before, after, control)
}

// TestFoldMapsNoASCIIWordOntoAnother pins why Fold leaves ASCII alone
// (docs/decisions/0010-text-safety.md): the confusables skeleton of
// whole words makes distinct English words equal ("modern" and "modem";
// over the 8,485 distinct words of this repository's documents, code and
// fixtures it merges two such groups), Fold makes no word of the
// fixtures equal to another.
func TestFoldMapsNoASCIIWordOntoAnother(t *testing.T) {
	for _, pair := range [][2]string{{"modern", "modem"}, {"rn", "m"}, {"1", "l"}, {"|", "l"}, {"0", "O"}} {
		if confusables.Skeleton(pair[0]) != confusables.Skeleton(pair[1]) {
			t.Errorf("the skeleton tells %q from %q; the reason for leaving ASCII alone is gone", pair[0], pair[1])
		}
		if Fold(pair[0]) == Fold(pair[1]) {
			t.Errorf("Fold makes %q equal to %q", pair[0], pair[1])
		}
	}
	folded := map[string]string{}
	n := 0
	for _, s := range fixtureTexts(t) {
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) {
			n++
			if other, ok := folded[Fold(w)]; ok && other != w {
				t.Errorf("Fold makes %q equal to %q", w, other)
			}
			folded[Fold(w)] = w
		}
	}
	t.Logf("%d ASCII words (%d distinct) fold to themselves", n, len(folded))
}
