package rules

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// Whether rule text reads as an instruction (docs/thresholds.md,
// "Quality gate"). The judgement is made on English only; text in other
// languages is not judged.

// englishFunctionWords are frequent English words that other languages
// rarely spell the same way.
var englishFunctionWords = toSet(`the to of and is are be it this that these those there from with for by not do does
should must every each any when if than then into before after instead was were has have been its their your
which what they them you we our but or can will don't doesn't isn't aren't on too without never always`)

// englishOnlyWords are the function words of englishFunctionWords that no
// other common language writes as a word of its own ("to", "was", "do",
// "on" and "for" are words in Polish, German, Portuguese, French and
// Danish). One of them counts as two, so that a short English text such
// as "Log lines include the token." is judged too.
var englishOnlyWords = toSet(`the and with should every each which what when than then into instead been their
your they them these those there that from its have don't doesn't isn't aren't without never always`)

// looksEnglish reports whether text has at least two English function
// words (one that only English writes counts as two), making up at least
// a tenth of its words.
func looksEnglish(text string) bool {
	ws := words(foldApostrophes(text))
	found := map[string]bool{}
	score, n := 0, 0
	for _, w := range ws {
		if !englishFunctionWords[w] {
			continue
		}
		n++
		if !found[w] {
			found[w] = true
			score++
			if englishOnlyWords[w] {
				score++
			}
		}
	}
	return score >= 2 && n*10 >= len(ws)
}

// foldApostrophes writes typographic apostrophes as ASCII ones, so
// "don’t" is one word, as "don't" is.
func foldApostrophes(s string) string {
	return strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u02bc", "'").Replace(s)
}

// readsAsInstruction reports whether one sentence of text prescribes
// something (prescribes); English text whose every sentence only states
// a problem does not.
func readsAsInstruction(text string) bool {
	if !looksEnglish(text) {
		return true
	}
	for _, s := range rulefmt.Sentences(text) {
		if prescribes(s) {
			return true
		}
	}
	return false
}

// How a sentence is read. A sentence prescribes when it says so in so
// many words ("never …", "X should …"), or when its first clause parses
// as an imperative, a verb followed by its object, rather than as a
// subject followed by its verb ("log lines include …") or as a verb whose
// subject is left out ("leaks the token …"). Many English verbs are also
// nouns ("log", "call", "test", "name", "record"), so a list of words
// cannot settle it; the words around such a word do, as for a reader:
//
//   - After a determiner or a preposition a word is a noun ("every
//     call", "per call"). A verb without -s needs a plural subject ("log
//     lines include"), so after a singular word it is a noun too ("every
//     network or external call").
//   - A first word followed by a determiner, a quantifier, an object
//     pronoun or a code span is an imperative verb with its object
//     ("Name every …", "Log the request id", "Use `errors.Is` …"): a noun
//     that could be a subject is not followed by one.
//   - A first word in -s, -ed or -ing is not an imperative: "Leaks the
//     token", "Returns nil", "Swallowed errors", "Missing tests" state
//     something with the subject left out; so do "has …", "doesn't …".
//     A determiner, a number, a pronoun, a code span or an evaluative
//     adjective opens a subject or a noun phrase ("every test uses …",
//     "it's called …", "wrong key used …"), and so does "no": "No
//     timeout on the client" is read as draft.go reads it, as missing.
//   - A verb in -s after a singular word is a plural noun when a
//     preposition, a conjunction or the clause's end follows it ("log
//     external calls with their duration", "retry idempotent calls
//     only"), and finite otherwise ("handler returns a 500", "thread dump
//     shows two goroutines"), always when it is rarely a noun
//     ("includes", "ignores") or follows a code span. A past form is a
//     participle when something other than an object follows it ("errors
//     returned by Close", "files opened for writing", "failed calls").
//   - An auxiliary ("is", "are", "has", "can", "doesn't") or an adverb
//     such as "never" or "still" after the first word marks a statement
//     wherever it stands ("cache never expires"): an object holds none.
//   - A clause ends at a comma, a dash, a bracket or a colon (see
//     prescribes), and a subordinate one starts at "that", "what",
//     "how", "not", "but" and the like: verbs after them are not the
//     main verb ("name functions for what they return, not how they
//     work"). Bracketed asides are left out, and quoted text and code
//     spans read as one noun.
//
// Known limits: a plural that is also a verb reads as finite before a
// second object ("Give external calls a deadline" is refused; "Give
// every external call a deadline" passes), and as a noun before a
// preposition even when it is the verb ("Handler panics on nil input"
// passes); a noun phrase without a verb that opens with an unknown noun
// ("Memory leak in the worker") reads as an imperative.
var (
	// prescriptiveStarts open an instruction.
	prescriptiveStarts = toSet(`always never don't dont avoid ensure prefer only please pls plz let let's`)
	// modals make a sentence prescriptive wherever they stand ("errors
	// should carry context").
	modals = toSet(`should must shall ought`)
	// conditionals open a clause before the instruction ("when …, use …").
	conditionals = toSet(`when whenever if unless before after once for in on during while where without because
since until besides except`)
	// fillers before the first clause say nothing ("hmm", "also", "and").
	fillers = toSet(`hmm hmmm ehh eh uh um ugh oh ah nit nitpick fyi imo btw ok okay well so also again still yeah yes
and or but then`)
	// statementStarts open a subject or a noun phrase: a determiner, a
	// pronoun, a question word, or a negation or quantity ("no timeout
	// on the client", "too many nested ifs").
	statementStarts = toSet(`the a an this that these those there it its we they i he she you our my their his her
some many most no not too nobody none nothing neither every each all any both either several few half
zero one two three four five ten someone somebody everyone everybody anyone anybody which what who whom whose
why how it's that's there's they're we're you're i'm i've i'd i'll we'll we've they've here's what's who's
he's she's`)
	// evaluativeAdjectives open a noun phrase that judges ("redundant
	// comments everywhere", "wrong key used for the lookup").
	evaluativeAdjectives = toSet(`wrong bad broken incorrect inconsistent invalid redundant unnecessary pointless
useless meaningless misleading confusing unclear vague flaky fragile brittle risky unsafe insecure dead stale
excessive huge lost concurrent potential possible hard same similar different identical stray new old small big
nice extra`)
	// auxiliaries are finite verbs wherever they stand. They are not
	// "do" and "have", which also open imperatives ("do the migration
	// in two steps") and are judged as verbForms.
	auxiliaries = toSet(`is are was were am has had does did can could would will may might cannot isn't aren't
wasn't weren't hasn't hadn't haven't doesn't didn't don't can't couldn't won't wouldn't got`)
	// subjectlessStarts are the auxiliaries that open a statement whose
	// subject is left out ("has no test for …", "doesn't close …").
	subjectlessStarts = toSet(`is are was were has had does did isn't aren't wasn't weren't hasn't hadn't doesn't
didn't can't couldn't won't wouldn't cannot may might got`)
	// ambiguousVerbs are imperative verbs that are also nouns: "log lines
	// include …" is a statement, "log the request id" an instruction.
	ambiguousVerbs = toSet(`log test name list link document state reference release guard mock return check update
drop break limit cover run split move close pin escape use cite stop handle report query commit record
store cache sort load copy print call type format process lock block build change`)
	// verbForms are verb forms that make a statement of a sentence when
	// they are its main verb ("the build fails", "log lines include …").
	// Most are nouns too ("external calls"): where they stand decides.
	verbForms = toSet(`do have include includes included contain contains lack lacks leak leaks leaked fail fails
failed miss misses missed break breaks broke get gets got go goes went show shows print prints printed log logs
logged return returns returned use uses used call calls called ignore ignores ignored swallow swallows swallowed
hang hangs hung take takes took make makes made keep keeps kept run runs ran need needs cause causes caused
create creates created write writes wrote read reads send sends sent open opens opened expose exposes exposed
repeat repeats duplicate duplicates throw throws threw panic panics crash crashes crashed seem seems look looks
work works happen happens exist exists end ends ended lose loses lost become becomes say says said tell tells
told mean means meant assume assumes assumed expect expects expected produce produces produced allow allows
allowed depend depends stay stays wait waits skip skips skipped drop drops dropped block blocks blocked check
checks checked change changes changed retry retries retried hold holds held want wants wanted try tries tried`)
	// verbOnlyForms are the -s forms of verbForms that are rarely plural
	// nouns: after a singular word they are finite wherever they stand.
	verbOnlyForms = toSet(`includes contains lacks fails ignores swallows hangs seems happens exists becomes loses
causes creates exposes gets goes takes makes keeps sends throws opens needs works looks ends says tells means uses
assumes expects produces allows depends stays waits skips holds wants tries`)
	// determiners open a noun phrase: after one, a verb form is a noun,
	// and after a first word one marks it as an imperative verb.
	determiners = toSet(`the a an every each all any no this these those its their your our my his her some both
either another one two three several few many much more most it them us him me`)
	// prepositions take a noun: a verb form after one is a noun ("per
	// call") or a gerund.
	prepositions = toSet(`of in on at by for with from into onto per via about over under behind through across
between within without against like inside outside around to`)
	// statementAdverbs stand between a subject and its verb: "cache
	// never expires", "log lines still include the token".
	statementAdverbs = toSet(`never always still already often sometimes rarely usually also just now`)
	// clauseBreaks end the clause that holds the main verb: a verb after
	// them belongs to a subordinate or a contrasted clause ("return errors
	// that are …", "name them for what they return, not how they work").
	clauseBreaks = toSet(`that which who whom whose what how why when where whether if because so than as while since
until unless before after once not but`)
	// politeAsks open a request ("could you …") or a question about
	// something ("could this hang").
	politeAsks = toSet(`can could would will`)
	// subjectPronouns are the subjects a verb without -s agrees with.
	subjectPronouns = toSet(`i we you they`)
	// verbLinks before a verb make it an infinitive or a second
	// imperative rather than the verb of a statement.
	verbLinks = toSet(`to and or then`)
	// baseFormsInIng and baseFormsInEd are imperatives that look like a
	// participle.
	baseFormsInIng = toSet(`bring string ping ring sing sting swing spring sling fling cling wring`)
	baseFormsInEd  = toSet(`embed shed shred`)
	// pastForms are irregular past forms that are participles too.
	pastForms = toSet(`got hung made kept sent lost told meant said held found`)
	// simplePast are past forms that are never participles: finite
	// wherever they stand.
	simplePast = toSet(`went broke took threw ran wrote became blew grew began`)
	// notThirdPerson end in -s without being a verb's -s form or a plural.
	notThirdPerson = toSet(`alias bias canvas perhaps thus plus chaos`)
)

// prescribes reports whether an English sentence says what to do: it
// starts with "never", "always", "don't", "avoid" and the like, has a
// modal verb ("X should Y"), or its first clause is an imperative.
//
// A clause after a colon is judged too ("The client has no timeout:
// always set one"). An imperative the parse is not sure of (no finite
// verb, and nothing else marks it) counts before a colon when it is not
// a label, that is when it has four words or more or opens with a known
// verb and has three ("Use table tests: …", not "Boundary bug: …" or
// "Log output: …"), and after a colon only behind labels ("Timeouts: use
// context.WithTimeout …", not "The test file mixes three styles:
// table-driven, …").
func prescribes(sentence string) bool {
	parts := strings.Split(plainText(sentence), ": ")
	labels := true
	for i, p := range parts {
		fields := strings.Fields(p)
		label := len(fields) < 4 && (len(fields) < 3 || directiveVerbs[strings.ToLower(fields[0])] == "")
		switch prescription(p) {
		case instructs:
			return true
		case mayInstruct:
			if len(parts) == 1 || i == 0 && !label || i == len(parts)-1 && labels {
				return true
			}
		}
		labels = labels && label
	}
	return false
}

// A reading of a clause.
type reading int

const (
	states      reading = iota // a statement
	mayInstruct                // no finite verb, and nothing else makes it an imperative
	instructs                  // an imperative, or prescriptive words
)

// codeWord stands for a code span or a quotation: a noun, and the
// subject when it opens a sentence ("`hasPermission` returns early").
const codeWord = "codespan"

var (
	// quoted matches code spans and quotations; a single quote only
	// after a space, so that it is not an apostrophe.
	quoted = regexp.MustCompile("`[^`]*`|\"[^\"]*\"|“[^”]*”|(?:^|\\s)'[^']*'(?:\\s|[.,;:!?]|$)")
	aside  = regexp.MustCompile(`\([^()]*\)|\[[^\[\]]*\]`)
)

// plainText rewrites a sentence for reading: code spans and quotations
// become codeWord, bracketed asides ("(client timeout or context)", the
// arguments of a call) go, and typographic apostrophes become ASCII ones.
func plainText(sentence string) string {
	s := quoted.ReplaceAllString(foldApostrophes(sentence), " "+codeWord+" ")
	for {
		t := aside.ReplaceAllString(s, " ")
		if t == s {
			return s
		}
		s = t
	}
}

// prescription reads one clause (see the comment above the word lists).
func prescription(sentence string) reading {
	ws := skipFillers(words(sentence))
	if len(ws) == 0 {
		return states
	}
	for _, w := range ws {
		if modals[w] {
			return instructs
		}
	}
	first, rest := firstClause(sentence)
	switch {
	case conditionals[ws[0]]:
		// "When X, do Y": judge what follows a comma; the condition may
		// hold commas of its own ("when you change names, flags or
		// defaults, update …").
		best := instructionInCondition(skipFillers(first))
		for rest != "" {
			first, rest = firstClause(rest)
			switch first = skipFillers(first); {
			case len(first) == 0:
			case conditionals[first[0]]:
				best = max(best, instructionInCondition(first))
			default:
				best = max(best, imperative(first))
			}
		}
		return best
	}
	lead := skipFillers(first)
	if rest != "" && (len(lead) == 0 || len(lead) == 1 && directiveVerbs[lead[0]] == "") {
		// "Hmm, …", "Inside, …": a word of its own before the clause.
		return prescription(rest)
	}
	return imperative(lead)
}

// instructionInCondition reads the instruction that follows a condition
// without a comma: "In hot paths avoid allocations", "Before you merge
// ensure …". Only a word that cannot be the condition's own verb starts
// it: "avoid", "ensure", "prefer", "don't", or a verb that is rarely a
// noun after a word that cannot be its subject ("when you add a
// handler" is the condition). A condition that is a prepositional phrase
// ("for machine-read output", "before merging") has no verb of its own,
// so the first word after its noun that takes an object starts the
// instruction: "For machine-read output emit only valid JSON"; a word
// after a determiner is still the phrase's noun ("in the handler the
// error is ignored").
func instructionInCondition(ws []string) reading {
	if len(ws) == 0 {
		return states
	}
	phrase := prepositions[ws[0]] || ws[0] == "before" || ws[0] == "after" || ws[0] == "during"
	for i := 1; i < len(ws); i++ {
		w, prev, next := ws[i], ws[i-1], ""
		if i+1 < len(ws) {
			next = ws[i+1]
		}
		switch {
		case subjectPronouns[prev] || verbLinks[prev] || auxiliaries[prev]:
			// "when you add …", "if we don't …": the condition's verb.
		case w == "avoid" || w == "ensure" || w == "prefer" || (w == "don't" || w == "dont") && !plural(prev):
			return instructs
		case directiveVerbs[w] == rulefmt.Guideline && !ambiguousVerbs[w] && !plural(prev):
			return imperative(ws[i:])
		case phrase && i > 1 && !functionWord(w) && !functionWord(prev) && !thirdPerson(w) && !participle(w) &&
			(determiners[next] || next == "only" || next == codeWord):
			return imperative(ws[i:])
		}
	}
	return states
}

// skipFillers drops the fillers that open a clause.
func skipFillers(ws []string) []string {
	for len(ws) > 0 && fillers[ws[0]] {
		ws = ws[1:]
	}
	return ws
}

// clauseEnd ends the first clause of a sentence: a comma, a semicolon,
// a dash or an opening bracket left unclosed ("Use a named constant
// (maxUploadBytes").
var clauseEnd = regexp.MustCompile(`[,;(\[—–]| - `)

// firstClause splits sentence into the words of its first clause, the
// one that holds the main verb, and the text after it.
func firstClause(sentence string) ([]string, string) {
	if loc := clauseEnd.FindStringIndex(sentence); loc != nil {
		return words(sentence[:loc[0]]), sentence[loc[1]:]
	}
	return words(sentence), ""
}

// imperative reads the words of a clause not opened by a conditional.
func imperative(ws []string) reading {
	if len(ws) == 0 {
		return states
	}
	first := ws[0]
	switch {
	case prescriptiveStarts[first],
		len(ws) > 1 && (first == "make" && ws[1] == "sure" || first == "do" && ws[1] == "not"):
		return instructs
	case politeAsks[first] && len(ws) > 2 && (ws[1] == "you" || ws[1] == "we"):
		// "Could you handle …", "Can we keep …": a request.
		return imperative(ws[2:])
	case statementStarts[first], subjectlessStarts[first], politeAsks[first], first == codeWord, isNumber(first),
		adjective(first):
		return states
	case directiveVerbs[first] != "" && !ambiguousVerbs[first]:
		return instructs
	case thirdPerson(first) || participle(first) || simplePast[first] || pastForms[first]:
		// "Leaks the token", "Returns nil", "Swallowed errors",
		// "Missing tests": a statement with its subject left out.
		return states
	case len(ws) == 1:
		return mayInstruct
	case determiners[ws[1]] || ws[1] == codeWord && directiveVerbs[first] != "":
		// "Name every …", "Log the request id", "Use `errors.Is`": a
		// verb and its object.
		return instructs
	}
	// A first word that may be a verb or a noun: a statement when a
	// finite verb follows it in its clause.
	for i := 1; i < len(ws) && !clauseBreaks[ws[i]]; i++ {
		if finiteAt(ws, i) {
			return states
		}
	}
	return mayInstruct
}

// finiteAt reports whether ws[i] is the finite verb of a clause whose
// subject is ws[:i].
func finiteAt(ws []string, i int) bool {
	w, prev := ws[i], ws[i-1]
	if verbLinks[prev] {
		// "to call", "and call": an infinitive or a second imperative.
		return false
	}
	next := ""
	if i+1 < len(ws) {
		next = ws[i+1]
	}
	switch {
	case auxiliaries[w] || simplePast[w]:
		return true
	case statementAdverbs[w]:
		// "cache never expires"; not "use retries now".
		return next != "" && !functionWord(next)
	case i == 1 && participle(w) && (determiners[next] || next == codeWord):
		// "Reviewer approved it": an imperative's object does not start
		// with a past form.
		return true
	}
	if !verbForms[w] || determiners[prev] || prepositions[prev] || strings.HasSuffix(prev, "'s") {
		// "every call", "per call", "the caller's call": a noun.
		return false
	}
	switch {
	case strings.HasSuffix(w, "ed") || !strings.HasSuffix(w, "s") && pastForms[w]:
		// A past tense takes an object or ends the clause ("call sites
		// ignored the error"), and right after the first word anything
		// but a noun ("TestRetry failed on CI"); otherwise it is a
		// participle ("errors returned by Close", "failed calls").
		if i == 1 {
			return next == "" || next == codeWord || functionWord(next)
		}
		return next == "" || determiners[next]
	case thirdPerson(w):
		// Agrees only with a singular subject ("log lines includes" is
		// not English). "Calls" after "external" is a plural noun when
		// a preposition or the clause's end follows it.
		if plural(prev) {
			return false
		}
		return verbOnlyForms[w] || prev == codeWord || !(next == "" || next == "only" || prepositions[next] ||
			verbLinks[next] || clauseBreaks[next])
	default:
		// A base form agrees with a plural subject ("log lines
		// include", "we use"); after a singular word it is a noun
		// ("external call").
		return plural(prev) || subjectPronouns[prev]
	}
}

// functionWord reports whether w is a word of the grammar rather than a
// noun or an adjective: after a past form, it makes a past tense of it.
func functionWord(w string) bool {
	return determiners[w] || prepositions[w] || verbLinks[w] || clauseBreaks[w] || statementAdverbs[w] ||
		auxiliaries[w] || isNumber(w)
}

// thirdPerson reports whether w has the -s ending of a verb's third
// person or of a plural noun ("leaks", "calls"), not that of "pass",
// "focus" or "this".
func thirdPerson(w string) bool {
	if len(w) < 3 || notThirdPerson[w] || !strings.HasSuffix(w, "s") || strings.HasSuffix(w, "'s") {
		return false
	}
	return !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is")
}

// plural reports whether w looks like a plural noun.
func plural(w string) bool {
	return thirdPerson(w) || w == "people" || w == "children"
}

// participle reports whether w looks like a participle or a past tense
// ("missing", "swallowed", "used") rather than a base form ("bring",
// "embed", "need").
func participle(w string) bool {
	switch {
	case strings.HasSuffix(w, "ing"):
		return len(w) > 4 && !baseFormsInIng[w]
	case strings.HasSuffix(w, "ed"):
		return len(w) > 3 && !strings.HasSuffix(w, "eed") && !baseFormsInEd[w]
	}
	return false
}

// adjective reports whether w is an adjective that no verb spells the
// same way: an evaluative one, or one in -ous, -ful or -less.
func adjective(w string) bool {
	if evaluativeAdjectives[w] {
		return true
	}
	return len(w) > 5 && (strings.HasSuffix(w, "ous") || strings.HasSuffix(w, "ful") || strings.HasSuffix(w, "less"))
}

// isNumber reports whether w is written in digits.
func isNumber(w string) bool {
	return w != "" && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsDigit(r) }) < 0
}
