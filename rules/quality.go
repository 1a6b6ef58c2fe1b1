package rules

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/precept-dev/precept/lib/english"
	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Quality is the pre-commit quality gate (docs/thresholds.md, "Quality gate"). The zero value
// means the defaults.
type Quality struct {
	// MinLength and MaxLength bound the rule text in characters; defaults
	// 20 and 800.
	MinLength, MaxLength int
	// MinSignalDensity is the least share of words that carry meaning
	// (not stop words or filler); default 0.4.
	MinSignalDensity float64
	// Denylist adds phrases to the built-in denylist; matching ignores
	// case, punctuation and spacing.
	Denylist []string
}

// DefaultQuality is the quality gate's defaults: long enough to say
// something, short enough for a prompt, and at least 40% of the words
// carrying meaning.
func DefaultQuality() Quality {
	return Quality{MinLength: 20, MaxLength: 800, MinSignalDensity: 0.4}
}

func (q Quality) withDefaults() Quality {
	d := DefaultQuality()
	if q.MinLength <= 0 {
		q.MinLength = d.MinLength
	}
	if q.MaxLength <= 0 {
		q.MaxLength = d.MaxLength
	}
	if q.MinSignalDensity <= 0 {
		q.MinSignalDensity = d.MinSignalDensity
	}
	return q
}

// Check applies the gate to rule text. It returns "" when the text passes,
// otherwise the reason it is blocked. A reason never repeats a secret.
//
// The text is refused outright when it holds a control character; the
// secret and denylist checks read it through lib/safetext's folding,
// so invisible characters, look-alike letters, markup and base64 hide
// nothing from them (docs/decisions/0010-text-safety.md). Last, the text
// must read as an instruction: a rule that only states a problem would
// teach an agent the problem.
func (q Quality) Check(content string) string {
	q = q.withDefaults()
	if r, _, bad := safetext.Control(content); bad {
		return "the rule text " + safetext.ControlReason(r)
	}
	n := utf8.RuneCountInString(strings.TrimSpace(content))
	switch {
	case n < q.MinLength:
		return fmt.Sprintf("the rule text has %d characters, fewer than the minimum of %d", n, q.MinLength)
	case n > q.MaxLength:
		return fmt.Sprintf("the rule text has %d characters, more than the maximum of %d", n, q.MaxLength)
	}
	if kind := safetext.Secret(content); kind != "" {
		return "the rule text " + safetext.SecretReason(kind)
	}
	if phrase := safetext.Denied(content, q.Denylist); phrase != "" {
		return "the rule text " + safetext.DeniedReason(phrase)
	}
	if d := SignalDensity(content); d < q.MinSignalDensity {
		return fmt.Sprintf("signal density %.2f is below %.2f: too few words carry meaning", d, q.MinSignalDensity)
	}
	if !readsAsInstruction(content) {
		return fmt.Sprintf("the rule text does not read as an instruction: %q states a problem without saying what to do; "+
			"write what the agent should do (\"Never …\", \"Always …\", \"Use …\", \"X must …\")", text.ClipWords(rulefmt.FirstSentence(content), 80))
	}
	return ""
}

// stopWords carry no meaning of their own in a rule: Snowball's list
// and reviewers' chatter (lib/english), modal verbs and a few more, but
// not the words that say when or where an instruction applies
// ("before", "after", "until", "while", "through", "now" …).
var stopWords = english.StopSet(english.Snowball, english.Chatter, []string{
	"would", "could", "may", "might", "must", "shall", "also", "us", "via", "etc", "per",
	"it's", "else", "onto", "rather", "whose", "yes", "something", "anything", "everything",
}).Without([]string{"above", "after", "against", "because", "before", "below", "between", "during", "now", "through", "until", "while"})

// toSet is the set of the words of a space-separated list.
func toSet(words string) map[string]bool { return english.StopSet(strings.Fields(words)) }

// words splits text into lower-case words of letters, digits and
// apostrophes ("don't" stays whole).
func words(text string) []string { return english.Tokens(text, english.Options{Keep: "'"}) }

// isContentWord reports whether a word carries meaning: at least three
// letters, not a stop word, not a number.
func isContentWord(w string) bool {
	if utf8.RuneCountInString(w) < 3 || stopWords[w] {
		return false
	}
	return strings.IndexFunc(w, unicode.IsLetter) >= 0
}

// contentWords counts the words of s that carry meaning.
func contentWords(s string) int {
	n := 0
	for _, w := range words(s) {
		if isContentWord(w) {
			n++
		}
	}
	return n
}

// SignalDensity is the share of the words of text that carry meaning
// (0 for text without words). Repeating a word does not add signal.
func SignalDensity(text string) float64 {
	ws := words(text)
	if len(ws) == 0 {
		return 0
	}
	seen := map[string]bool{}
	signal := 0
	for _, w := range ws {
		if isContentWord(w) && !seen[w] {
			signal++
		}
		seen[w] = true
	}
	return float64(signal) / float64(len(ws))
}
