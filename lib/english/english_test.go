package english

import (
	"strings"
	"testing"
)

// TestWords is the one table of how the toolkit reads text, with the
// cases each caller relies on. want lists the words separated by spaces;
// identifier parts are marked with *.
func TestWords(t *testing.T) {
	rubric := Options{Keep: "'’-_"}
	gate := Options{Keep: "'"}
	lesson := Options{ASCIILetters: true}
	for _, tc := range []struct {
		o    Options
		in   string
		want string
	}{
		// The local embedder and the lesson classifier's terms (Code).
		{Code, "Missing tests, again!", "missing tests again"},
		{Code, "don't ignore it’s errors", "dont ignore its errors"},
		{Code, "'quoted' words'", "quoted words"},
		{Code, "HTTPClient parseURL getUser", "http* client* parse* url* get* user*"},
		{Code, "URLs and APIs", "urls and apis"},
		{Code, "resp.Body.Close() and max_retries", "resp body* close* and max retries*"},
		{Code, "config.go, e.g. this", "config go* e g* this"},
		{Code, "sha256 v2 0x1F", "sha256 v2 0x1f"},
		{Code, "ÉCOLE Straße", "école straße"},
		{Code, "テストがない", "テ ス ト が な い"},
		{Code, "bad\xffbytes\xc3", "bad bytes"},
		{Code, "e\u0301t\u00e9", "e\u0301t\u00e9"},
		{Code, "hard-coded", "hard coded"},
		{Code, "", ""},
		// The clarity rubric: apostrophes, hyphens and underscores stay
		// in words ("isn't", "follow-up").
		{rubric, "LGTM, but don't: follow-up on max_retries isn’t done", "lgtm but don't follow-up on max_retries isn’t done"},
		{rubric, "'quoted'", "'quoted'"},
		{rubric, "HTTPClient e\u0301", "httpclient e"},
		// The quality gate: "don't" and "it's" stay whole, typographic
		// apostrophes separate.
		{gate, "Don't log it's tokens; don’t", "don't log it's tokens don t"},
		{gate, "Use sha256, v2.", "use sha256 v2"},
		// The lesson vocabulary: letters a to z only.
		{lesson, "Hard-coded UTF8 naïve \u212Aey", "hard coded utf na ve key"},
	} {
		var got []string
		for _, w := range Words(tc.in, tc.o) {
			if w.Ident {
				w.Text += "*"
			}
			got = append(got, w.Text)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("Words(%q, %+v) = %q, want %q", tc.in, tc.o, g, tc.want)
		}
		if g, want := strings.Join(Tokens(tc.in, tc.o), " "), strings.ReplaceAll(tc.want, "*", ""); g != want {
			t.Errorf("Tokens(%q, %+v) = %q, want %q", tc.in, tc.o, g, want)
		}
	}
}

func TestPolarity(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"Always wrap errors.", 1},
		{"Never log tokens.", -1},
		{"Do not print secrets.", -1},
		{"Don't print secrets.", -1},
		{"Don’t print secrets.", -1},
		{"Use the shared retry helper.", 1},
		{"Avoid the shared retry helper.", -1},
		{"Remove debug print statements.", -1},
		{"Make sure the commit message is short.", 1},
		{"You should not retry forever.", -1},
		{"The parser fails on empty input.", 0},
		{"", 0},
	} {
		if got := Polarity(tc.text); got != tc.want {
			t.Errorf("Polarity(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestStem(t *testing.T) {
	for in, want := range map[string]string{
		"retries": "retri", "retrying": "retri", "tests": "test", "logging": "log",
		"sha256": "sha256", "école": "école", strings.Repeat("a", MaxStemLen+1): strings.Repeat("a", MaxStemLen+1),
	} {
		if got := Stem(in); got != want {
			t.Errorf("Stem(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNegationsAndStopSets(t *testing.T) {
	for _, w := range []string{"no", "not", "never", "without", "dont", "cannot", "nt"} {
		if !IsNegation(w) {
			t.Errorf("%q is not a negation", w)
		}
	}
	for _, w := range []string{"none", "nothing less", "now", "know"} {
		if IsNegation(w) {
			t.Errorf("%q is a negation", w)
		}
	}
	s := StopSet(Snowball, Contractions)
	if !s["the"] || !s["dont"] || s["tests"] {
		t.Errorf("StopSet(Snowball, Contractions) = %d words, the %v, dont %v, tests %v", len(s), s["the"], s["dont"], s["tests"])
	}
	w := s.Without(Negations, []string{"off"})
	if w["not"] || w["dont"] || w["off"] || !w["the"] || !s["not"] {
		t.Errorf("Without dropped the wrong words, or changed its receiver")
	}
	seen := map[string]string{}
	for name, list := range map[string][]string{"Snowball": Snowball, "Contractions": Contractions, "FunctionWords": FunctionWords, "Chatter": Chatter} {
		for _, w := range list {
			if w != strings.ToLower(w) {
				t.Errorf("%s: %q is not lower case", name, w)
			}
			if prev, ok := seen[w]; ok {
				t.Errorf("%q is listed twice, in %s and %s", w, prev, name)
			}
			seen[w] = name
		}
	}
}
