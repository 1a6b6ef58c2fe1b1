package lesson

import (
	"slices"
	"strings"

	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/english"
)

// A term is a word as the classifier compares it: stemmed, with
// negations (english.Negations) folded into one term ("no", "not",
// "never", "without" and the contractions are all "not") and function
// words dropped. "off", "one", "two", "once" and "too" are kept: "off by
// one", "once per row", "too long" are what reviewers say. So are a few
// stop words the classifier's weights were chosen with ("because",
// "against", "ever", the reflexive pronouns).
const negation = "not"

// functionWords are lib/english's stop words and reviewers' chatter, and
// the words every review uses whatever it is about.
var functionWords = english.StopSet(english.Snowball, english.Contractions, english.FunctionWords, english.Chatter, []string{
	"agent", "code", "pr", "get", "got", "go", "let", "like", "look", "lot", "made", "make",
	"need", "needs", "see", "think", "want", "way",
}).Without(english.Negations, []string{"off", "one", "two", "once", "too"}, []string{
	"against", "because", "ever", "don", "myself", "ours", "ourselves", "yourself", "yourselves",
	"himself", "herself", "theirs", "themselves", "theyve", "youd", "youll",
})

// vocabulary holds every word the taxonomy uses, for typo repair: a
// word of the input that is not in it, but is one edit (a deletion,
// insertion, substitution or swap of neighbours) from a word that is,
// is read as that word.
type vocabulary struct {
	words map[string]bool
	// deletes maps each word with one letter deleted to the words it
	// came from (sorted).
	deletes map[string][]string
	// pairs maps two neighbouring words written together ("hardcoded")
	// to the pair as the taxonomy writes it ("hard", "coded"), so
	// "hard-coded", "hard coded" and "hardcoded" read alike.
	pairs map[string][2]string
}

// minRepair is the shortest word repaired: shorter words have too many
// neighbours at one edit ("test" / "text" / "rest").
const minRepair = 5

func newVocabulary() *vocabulary {
	return &vocabulary{words: map[string]bool{}, deletes: map[string][]string{}, pairs: map[string][2]string{}}
}

// minCompoundPart is the shortest part of a compound: "hard"+"coded",
// "time"+"out", not "a"+"way".
const minCompoundPart = 3

// addPair records two neighbouring words of the taxonomy.
func (v *vocabulary) addPair(a, b string) {
	if len(a) < minCompoundPart || len(b) < minCompoundPart || english.IsNegation(a) || english.IsNegation(b) || functionWords[a] || functionWords[b] {
		return
	}
	if j := a + b; len(j) <= english.MaxStemLen {
		if _, ok := v.pairs[j]; !ok {
			v.pairs[j] = [2]string{a, b}
		}
	}
}

func (v *vocabulary) add(w string) {
	if v.words[w] || len(w) > english.MaxStemLen {
		return
	}
	v.words[w] = true
	if len(w) < minRepair-1 {
		return
	}
	for i := range len(w) {
		d := w[:i] + w[i+1:]
		if !slices.Contains(v.deletes[d], w) {
			v.deletes[d] = append(v.deletes[d], w)
		}
	}
}

func (v *vocabulary) finish() {
	for _, ws := range v.deletes {
		slices.Sort(ws)
	}
}

// repair returns the vocabulary word w is a typo of, or w.
func (v *vocabulary) repair(w string) string {
	if len(w) < minRepair || len(w) > english.MaxStemLen || v.words[w] || !english.IsASCIIWord(w) {
		return w
	}
	// A letter missing from w: w is a deletion of a vocabulary word.
	if c := v.deletes[w]; len(c) > 0 {
		return c[0]
	}
	best := ""
	for i := range len(w) {
		d := w[:i] + w[i+1:]
		// A letter too many in w.
		if v.words[d] && (best == "" || d < best) {
			best = d
		}
		// A letter wrong in w, or two neighbours swapped: both w and the
		// word lose one letter to the same string.
		for _, c := range v.deletes[d] {
			if len(c) == len(w) && c != w && (best == "" || c < best) && sameExceptOne(c, w) {
				best = c
			}
		}
	}
	if best != "" {
		return best
	}
	return w
}

// sameExceptOne reports whether a and b (of one length) differ in one
// position, or in two neighbouring positions swapped.
func sameExceptOne(a, b string) bool {
	diff := -1
	for i := range len(a) {
		if a[i] == b[i] {
			continue
		}
		if diff >= 0 {
			return diff == i-1 && a[diff] == b[i] && a[i] == b[diff] && a[i+1:] == b[i+1:]
		}
		diff = i
	}
	return true
}

// terms reads text as the classifier compares it: words split as the
// local embedder splits them (identifiers into their parts), function
// words dropped, negations folded, typos of vocabulary words repaired
// (when v is not nil), and every word stemmed.
func terms(text string, v *vocabulary) []string {
	words := codeWords(text)
	out := make([]string, 0, len(words))
	for i := 0; i < len(words); i++ {
		t := words[i].Text
		if v != nil {
			// A compound the taxonomy writes as one word, written here as
			// two ("hard coded" for "hardcoded"), or the other way round.
			if i+1 < len(words) && !v.words[t] && v.words[t+words[i+1].Text] && len(t) >= minCompoundPart && len(words[i+1].Text) >= minCompoundPart {
				out = append(out, english.Stem(t+words[i+1].Text))
				i++
				continue
			}
			if p, ok := v.pairs[t]; ok && !v.words[t] {
				out = append(out, english.Stem(p[0]), english.Stem(p[1]))
				continue
			}
		}
		switch {
		case english.IsNegation(t):
			out = append(out, negation)
			continue
		case functionWords[t] || len(t) > english.MaxStemLen:
			continue
		}
		if v != nil {
			t = v.repair(t)
		}
		out = append(out, english.Stem(t))
	}
	return out
}

// codeWords splits text as the local embedder does (english.Code),
// reading as much of it as the embedder reads.
func codeWords(text string) []english.Word {
	if len(text) > embedding.MaxInputBytes {
		text = text[:embedding.MaxInputBytes]
	}
	return english.Words(text, english.Code)
}

// normTag compares tags and error categories: lower case, '_' and ' '
// as '-'.
func normTag(s string) string {
	return strings.NewReplacer("_", "-", " ", "-").Replace(strings.ToLower(strings.TrimSpace(s)))
}
