package embedding

import (
	"slices"
	"strings"
	"testing"
)

func TestTokenizeSplitsWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // words separated by spaces; identifier parts marked with *
	}{
		{"Missing tests, again!", "missing tests again"},
		{"don't ignore it’s errors", "dont ignore its errors"},
		{"'quoted' words'", "quoted words"},
		{"HTTPClient parseURL getUser", "http* client* parse* url* get* user*"},
		{"URLs and APIs", "urls and apis"},
		{"resp.Body.Close() and max_retries", "resp body* close* and max retries*"},
		{"config.go, e.g. this", "config go* e g* this"},
		{"sha256 v2 0x1F", "sha256 v2 0x1f"},
		{"ÉCOLE Straße", "école straße"},
		{"テストがない", "テ ス ト が な い"},
		{"bad\xffbytes\xc3", "bad bytes"},
		{"e\u0301t\u00e9", "e\u0301t\u00e9"},
		{"", ""},
	} {
		buf, spans := tokenize(tc.in, nil, nil)
		var got []string
		for _, sp := range spans {
			w := string(buf[sp.start:sp.end])
			if sp.ident {
				w += "*"
			}
			got = append(got, w)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("tokenize(%q) = %q, want %q", tc.in, g, tc.want)
		}
	}
}

// conceptsOf returns the names of the concepts Local finds in text, in
// the order found.
func conceptsOf(text string) []string {
	sc := new(scratch)
	sc.buf, sc.spans = tokenize(text, nil, nil)
	for _, sp := range sc.spans {
		w := sc.normalise(sc.buf[sp.start:sp.end])
		w.ident = sp.ident
		sc.words = append(sc.words, w)
	}
	sc.matchConcepts()
	var names []string
	for _, f := range sc.feats[blockConcept] {
		names = append(names, concepts[f.h].name)
	}
	return names
}

func TestConceptsFoundInText(t *testing.T) {
	for _, tc := range []struct {
		text        string
		has, hasNot []string
	}{
		{"tests are missing", []string{"testing", "missing"}, nil},
		{"no unit tests", []string{"testing", "missing"}, nil},
		{"the docs are out of date", []string{"docs", "outdated"}, nil},
		{"an invalid date", nil, []string{"outdated"}},
		{"retries are not logged", []string{"retry", "logging"}, nil},
		{"None of the tasks have acceptance criteria", []string{"missing", "task", "acceptance"}, []string{"null"}},
		{"get_user returns None", []string{"null"}, nil},
		// Stemming would conflate these; the concept table must not.
		{"inject a fake clock", []string{"timing"}, []string{"injection"}},
		{"the reviewer missed it", []string{"missed"}, []string{"missing"}},
		// One-letter typos of concept words, but not other words.
		{"PR lacks any unit tesst", []string{"testing"}, nil},
		{"no loging in the retry loop", []string{"logging"}, nil},
		{"timout on the client", []string{"timeout"}, nil},
		{"this takes a sprint", nil, []string{"print"}},
		{"read the Stripe key from Vault", []string{"secret"}, []string{"remove"}},
		// Parts of identifiers are code, not requests.
		{"TestDelete fails", nil, []string{"remove", "testing"}},
		{"call db.Close() here", nil, []string{"resource"}},
		{"config.Retry is unset", []string{"defaults"}, []string{"retry"}},
		{"use a WaitGroup", []string{"timing"}, nil},
		{"fmt.Println left in", []string{"print"}, nil},
	} {
		got := conceptsOf(tc.text)
		for _, c := range tc.has {
			if !slices.Contains(got, c) {
				t.Errorf("concepts of %q = %v, want %q among them", tc.text, got, c)
			}
		}
		for _, c := range tc.hasNot {
			if slices.Contains(got, c) {
				t.Errorf("concepts of %q = %v, want no %q", tc.text, got, c)
			}
		}
	}
}

func TestConceptTableIsWellFormed(t *testing.T) {
	names := map[string]bool{}
	for _, c := range concepts {
		if c.name == "" || names[c.name] {
			t.Errorf("concept name %q is empty or repeated", c.name)
		}
		names[c.name] = true
		if c.weight != aspect && c.weight != generic && c.weight != topic && c.weight != broad {
			t.Errorf("concept %q: weight %v is not one of the named weights", c.name, c.weight)
		}
		if len(c.phrases) == 0 {
			t.Errorf("concept %q has no phrases", c.name)
		}
		for _, p := range c.phrases {
			if _, n := phraseKey(p); n == 0 || n > maxPhraseWords {
				t.Errorf("concept %q: phrase %q has %d words, want 1..%d", c.name, p, n, maxPhraseWords)
			}
		}
	}
	// Concepts own dimensions; leave at least half of the smallest vector
	// to the hashed word features.
	if len(concepts)+1 > MinLocalDimension/2 {
		t.Errorf("%d concepts leave too few of %d dimensions to words", len(concepts), MinLocalDimension)
	}
}

func TestLexiconListsEachWordOnce(t *testing.T) {
	seen := map[string]string{}
	for name, list := range map[string][]string{"stopWords": stopWords, "fillerWords": fillerWords, "commonWords": commonWords} {
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
