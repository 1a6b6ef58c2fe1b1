package rules

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
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
func (q Quality) Check(text string) string {
	q = q.withDefaults()
	n := utf8.RuneCountInString(strings.TrimSpace(text))
	switch {
	case n < q.MinLength:
		return fmt.Sprintf("the rule text has %d characters, fewer than the minimum of %d", n, q.MinLength)
	case n > q.MaxLength:
		return fmt.Sprintf("the rule text has %d characters, more than the maximum of %d", n, q.MaxLength)
	}
	if kind := secretKind(text); kind != "" {
		return "the rule text contains what looks like a secret (" + kind + "); it must never enter a prompt"
	}
	if phrase := deniedPhrase(text, q.Denylist); phrase != "" {
		return fmt.Sprintf("the rule text contains the denylisted phrase %q", phrase)
	}
	if d := SignalDensity(text); d < q.MinSignalDensity {
		return fmt.Sprintf("signal density %.2f is below %.2f: too few words carry meaning", d, q.MinSignalDensity)
	}
	return ""
}

// builtinDenylist are phrases that must never enter a prompt: the common
// prompt-injection and role-hijacking strings.
var builtinDenylist = []string{
	"ignore previous instructions", "ignore all previous", "ignore the previous", "ignore prior instructions",
	"ignore the above", "ignore all instructions", "ignore your instructions", "disregard previous",
	"disregard all previous", "disregard the above", "disregard prior", "disregard your instructions",
	"forget your instructions", "forget all previous", "forget everything above", "override your instructions",
	"new instructions follow", "you are now", "from now on you are", "pretend to be", "act as if you have no",
	"reveal your system prompt", "print your system prompt", "show your system prompt",
	"developer mode", "jailbreak", "do anything now", "dan mode", "without any restrictions",
	"bypass your safety", "bypass the safety", "disable safety", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
	"[inst]", "[/inst]", "<<sys>>", "### system", "begin system prompt",
}

// normalizePhrase lower-cases and reduces every run of spaces and
// punctuation (except the characters of special tokens) to one space.
func normalizePhrase(s string) string {
	var b strings.Builder
	space := true
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("<>|[]/#", r) {
			b.WriteRune(r)
			space = false
			continue
		}
		if r == '\'' || r == '’' {
			continue
		}
		if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	return " " + strings.TrimSpace(b.String()) + " "
}

// deniedPhrase returns the first denylisted phrase text contains.
func deniedPhrase(text string, extra []string) string {
	norm := normalizePhrase(text)
	for _, list := range [][]string{builtinDenylist, extra} {
		for _, phrase := range list {
			p := normalizePhrase(phrase)
			if strings.TrimSpace(p) != "" && strings.Contains(norm, p) {
				return strings.TrimSpace(phrase)
			}
		}
	}
	return ""
}

// secretPatterns recognise credentials by shape.
var secretPatterns = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{"AWS access key id", regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"GitHub token", regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})`)},
	{"Slack token", regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
	{"API secret key", regexp.MustCompile(`\b(?:sk|rk|pk)[-_](?:live[-_]|test[-_]|proj[-_])?[A-Za-z0-9_-]{20,}`)},
	{"Google API key", regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`)},
	{"JSON web token", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.`)},
	{"credential assignment", regexp.MustCompile(`(?i)\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)\s*[:=]\s*["']?[^\s"']{6,}`)},
	{"URL with credentials", regexp.MustCompile(`[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@`)},
}

// longToken finds long unbroken runs of token characters.
var longToken = regexp.MustCompile(`[A-Za-z0-9+/=_-]{32,}`)

// secretKind names the kind of secret text seems to contain, or "".
func secretKind(text string) string {
	for _, p := range secretPatterns {
		if p.re.MatchString(text) {
			return p.kind
		}
	}
	for _, tok := range longToken.FindAllString(text, -1) {
		if looksRandom(tok) {
			return "high-entropy token"
		}
	}
	return ""
}

// looksRandom reports whether a long token mixes letters and digits the
// way keys and hashes do, rather than being a long identifier.
func looksRandom(tok string) bool {
	var letters, digits, upper, lower int
	for _, r := range tok {
		switch {
		case unicode.IsDigit(r):
			digits++
		case unicode.IsUpper(r):
			letters++
			upper++
		case unicode.IsLower(r):
			letters++
			lower++
		}
	}
	return digits >= 4 && letters >= 4 && (upper > 0 && lower > 0 || digits*4 >= len(tok))
}

// stopWords carry no meaning of their own in a rule.
var stopWords = toSet(`a an the and or but if then else so of to in on at by for with from as into onto
about over under than that this these those there here it its it's is are was were be been being am
do does did doing have has had having i me my we our us you your he she they them their his her
will would shall should can could may might must not no nor only own same too very just also
what which who whom whose when where why how all any both each few more most other some such
up down out off again further once per via etc yes ok okay please thanks thank lol hmm well really
quite rather stuff thing things something anything everything`)

func toSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// words splits text into lower-case words of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'')
	})
}

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
