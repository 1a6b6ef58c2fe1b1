package rules

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/precept-dev/precept/internal/safetext"
	"github.com/precept-dev/precept/internal/text"
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
// secret and denylist checks read it through internal/safetext's folding,
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
			"write what the agent should do (\"Never …\", \"Always …\", \"Use …\", \"X must …\")", text.ClipWords(firstSentence(content), 80))
	}
	return ""
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

// Whether rule text reads as an instruction (docs/thresholds.md,
// "Quality gate"). The judgement is made on English only; text in other
// languages is not judged.

// englishFunctionWords are frequent English words that other languages
// rarely spell the same way.
var englishFunctionWords = toSet(`the to of and is are be it this that these those there from with for by not do does
should must every each any when if than then into before after instead was were has have been its their your
which what they them you we our but or can will don't doesn't isn't aren't`)

// looksEnglish reports whether text has at least two English function
// words, making up at least a tenth of its words.
func looksEnglish(text string) bool {
	ws := words(text)
	found := map[string]bool{}
	n := 0
	for _, w := range ws {
		if englishFunctionWords[w] {
			found[w] = true
			n++
		}
	}
	return len(found) >= 2 && n*10 >= len(ws)
}

// readsAsInstruction reports whether one sentence of text prescribes
// something (prescribes); English text whose every sentence only states
// a problem does not.
func readsAsInstruction(text string) bool {
	if !looksEnglish(text) {
		return true
	}
	for _, s := range sentences(text) {
		if prescribes(s) {
			return true
		}
	}
	return false
}

// Words that decide how a sentence reads.
var (
	// prescriptiveStarts open an instruction.
	prescriptiveStarts = toSet(`always never don't dont avoid ensure prefer only no please`)
	// modals make a sentence prescriptive wherever they stand ("errors
	// should carry context").
	modals = toSet(`should must shall ought`)
	// conditionals open a clause before the instruction ("when …, use …").
	conditionals = toSet(`when whenever if unless before after once for in on during while where`)
	// subjects open a statement about something, not an instruction.
	subjects = toSet(`the a an this that these those there it its we they i he she you our my their his her
some many most`)
	// ambiguousVerbs are imperative verbs that are also nouns: "log lines
	// include …" is a statement, "log the request id" an instruction.
	ambiguousVerbs = toSet(`log test name list link document state reference release guard mock return check update
drop break limit cover run split move close pin escape use cite stop handle report query commit record
store cache sort load copy print call type format process lock block build change`)
	// finiteVerbs are verb forms that make a statement of a sentence when
	// they follow its first words ("tests are flaky", "the build fails").
	finiteVerbs = toSet(`is are was were has have had does did doesn't don't didn't isn't aren't wasn't weren't hasn't
haven't can't cannot won't will can could would may might include includes included contain contains lack lacks
leak leaks leaked fail fails failed miss misses missed break breaks broke get gets got go goes went show shows
print prints printed log logs logged return returns returned use uses used call calls called ignore ignores
ignored swallow swallows hang hangs hung take takes took make makes made keep keeps kept run runs ran need needs
cause causes caused create creates created write writes wrote read reads send sends sent open opens opened
expose exposes exposed repeat repeats duplicate duplicates throw throws threw panic panics crash crashes crashed
seem seems look looks work works happen happens exist exists end ends ended lose loses lost become becomes`)
	// clauseBreaks end the subject of a sentence: a finite verb after
	// them belongs to a subordinate clause ("return errors that are …").
	clauseBreaks = toSet(`that which who whom whose what how why when where if because so than as while since until unless`)
	// verbLinks before a verb make it an infinitive or a second
	// imperative rather than the verb of a statement.
	verbLinks = toSet(`to and or then`)
)

// prescribes reports whether an English sentence says what to do: it
// starts with "never", "always", "don't", "avoid" and the like or with an
// imperative verb, or it has a modal verb ("X should Y"). A sentence
// starting with a subject ("the …", "this …") or whose first words are
// followed by a finite verb ("log lines include …", "errors from the
// loop are …") states something instead.
func prescribes(sentence string) bool {
	ws := words(sentence)
	if len(ws) == 0 {
		return false
	}
	for _, w := range ws {
		if modals[w] {
			return true
		}
	}
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(sentence)), "make sure") || len(ws) > 1 && ws[0] == "do" && ws[1] == "not" {
		return true
	}
	if conditionals[ws[0]] {
		// "When X, do Y": judge the clause after the first comma.
		if _, rest, ok := strings.Cut(sentence, ","); ok {
			return prescribes(rest)
		}
		return false
	}
	first := ws[0]
	switch {
	case prescriptiveStarts[first]:
		return true
	case subjects[first]:
		return false
	case directiveVerbs[first] != "" && !ambiguousVerbs[first]:
		return true
	}
	// An ambiguous or unknown first word: a statement when a finite verb
	// follows within the first words of its clause.
	for i := 1; i < min(len(ws), 7); i++ {
		w := ws[i]
		if clauseBreaks[w] {
			break
		}
		// "to call", "and call": an infinitive or a second imperative;
		// "the returned", "its logs": a word a determiner governs.
		if finiteVerbs[w] && !verbLinks[ws[i-1]] && !subjects[ws[i-1]] {
			return false
		}
	}
	return true
}
