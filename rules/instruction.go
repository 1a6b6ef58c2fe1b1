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
//     A word in -s before a determiner, "what", "how" or a particle is
//     finite whatever it is ("wrap hides the original error", "audit log
//     records the wrong user", "comment describes what …", "queue fills
//     up"), unless the first word gives something to someone ("give
//     external calls a deadline"); so is one after an abstract noun
//     ("label cardinality explodes with …"). A verb without -s after the
//     plural that opens the clause is finite before its complement
//     ("benchmark numbers come from a laptop"), and a past form right
//     after the first word before anything but a noun ("latency doubled
//     after …").
//   - An auxiliary ("is", "are", "has", "can", "doesn't") or an adverb
//     such as "never" or "still" after the first word marks a statement
//     wherever it stands ("cache never expires"): an object holds none.
//   - "Need to" is a modal ("unit tests need to run in milliseconds"), as
//     the extractive draft reads it; a modal in a comparison is not
//     ("longer than it needs to be"). A leading adverb in -ly is left
//     out ("honestly this file …"), and a degree word after the first
//     word marks a noun phrase ("way too many allocations").
//   - A clause ends at a comma, a dash, a bracket or a colon (see
//     prescribes), and a subordinate one starts at "that", "what",
//     "how", "not", "but" and the like: verbs after them are not the
//     main verb ("name functions for what they return, not how they
//     work"). Bracketed asides are left out, and quoted text and code
//     spans read as one noun.
//
// Known limits: a word in -s after a singular noun reads as a plural
// noun before a preposition even when it is the verb ("Handler panics on
// nil input", "Batch size grows without a bound", "Lock order differs
// between Save and Delete" pass): a reader knows "panics", "grows" and
// "differs" are not things, and the parse does not; a noun phrase
// without a verb that opens with an unknown noun ("Memory leak in the
// worker", "Race condition between …") reads as an imperative.
var (
	// prescriptiveStarts open an instruction.
	prescriptiveStarts = toSet(`always never don't dont avoid ensure prefer only please pls plz let let's`)
	// modals make a sentence prescriptive wherever they stand ("errors
	// should carry context").
	modals = toSet(`should must shall ought`)
	// conditionals open a clause before the instruction ("when …, use …").
	conditionals = toSet(`when whenever if unless before after once for in on during while where without because
since until besides except`)
	// fillers before the first clause say nothing ("hmm", "also", "and",
	// "lol").
	fillers = toSet(`hmm hmmm ehh eh uh um ugh oh ah nit nitpick fyi imo btw ok okay well so also again still yeah yes
and or but then lol wow meh nope yikes`)
	// statementStarts open a subject or a noun phrase: a determiner, a
	// pronoun, a question word, or a negation or quantity ("no timeout
	// on the client", "too many nested ifs").
	statementStarts = toSet(`the a an this that these those there it its we they i he she you our my their his her
another some many most no not too nobody none nothing neither every each all any both either several few half
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
	simplePast = toSet(`went broke took threw ran wrote became blew grew began forgot`)
	// baseFormsInLy are verbs that look like adverbs.
	baseFormsInLy = toSet(`apply reply supply multiply`)
	// particles complete a phrasal verb: after a word in -s they mark it
	// as a verb ("queue fills up"), as no plural noun takes one.
	particles = toSet(`up down out off away back`)
	// objectDeterminers open an object: after a word in -s that follows
	// the clause's first word or its noun, one marks that word as the
	// finite verb ("wrap hides the original error", "audit log records
	// the wrong user"), because an imperative's object does not take a
	// second object unless its verb gives something to someone.
	objectDeterminers = toSet(`the a an this these those its their your our my his her every each`)
	// givingVerbs take two objects, so a plural and a determiner after
	// them are an object each ("give external calls a deadline").
	givingVerbs = toSet(`give send pass hand grant assign offer show tell teach leave allow deny charge`)
	// contentClauses after a word in -s are its object ("comment
	// describes what the code did"); a noun takes "that" or "which", not
	// these.
	contentClauses = toSet(`what how why whether`)
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
	if requires(ws) {
		return instructs
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

// requires reports whether a clause states a requirement with a modal
// ("errors should carry context", "every handler must …") or with "need
// to" ("unit tests need to run in milliseconds"), as the extractive draft
// reads them (draft.go, modalPattern). A modal in a comparison says how
// far something falls short, not what to do ("longer than it needs to
// be", "not as fast as it should be"), and "I need to …" tells of the
// speaker's own chore.
func requires(ws []string) bool {
	for i, w := range ws {
		if w == "than" || w == "as" {
			return false
		}
		need := (w == "need" || w == "needs") && i+1 < len(ws) && ws[i+1] == "to" && (i == 0 || ws[i-1] != "i")
		if modals[w] || need {
			return true
		}
	}
	return false
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
	for len(ws) > 0 && (fillers[ws[0]] || sentenceAdverb(ws[0])) {
		ws = ws[1:]
	}
	return ws
}

// sentenceAdverb reports whether w is an adverb in -ly that comments on
// the sentence rather than belonging to its clause ("honestly this file
// …", "explicitly close …"): not a verb in -ly ("apply", "reply") and not
// "only", which opens an instruction.
func sentenceAdverb(w string) bool {
	return len(w) > 5 && strings.HasSuffix(w, "ly") && !baseFormsInLy[w]
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
	case len(ws) > 1 && ws[1] == "too":
		// "Way too many allocations": a degree word after the first
		// word, where an imperative has its object.
		return states
	case directiveVerbs[first] != "" && !ambiguousVerbs[first]:
		if len(ws) > 2 && thirdPerson(ws[1]) && (objectDeterminers[ws[2]] || contentClauses[ws[2]]) && !givingVerbs[first] {
			// "Wrap hides the original error": a known verb used as the
			// subject's noun.
			return states
		}
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
	case i == 1 && strings.HasSuffix(w, "ed") && participle(w) && (next == "" || functionWord(next)):
		// "Latency doubled after this change": a past form right after
		// the first word, before anything but a noun, is its verb.
		return true
	case thirdPerson(w) && !plural(prev) && !functionWord(prev) && !givingVerbs[ws[0]] &&
		(objectDeterminers[next] || contentClauses[next] || particles[next]):
		// "Wrap hides the original error", "Comment describes what …",
		// "Queue fills up": a verb with its object or its particle.
		return true
	case i > 1 && strings.HasSuffix(w, "ed") && (next == "below" || next == "above"):
		// "Test coverage dropped below 60%".
		return true
	case i == 2 && thirdPerson(w) && abstractNoun(prev) && (prepositions[next] || next == ""):
		// "Label cardinality explodes with …": an abstract noun heads its phrase, so what follows
		// it is a verb; an imperative's object puts its head last
		// ("network calls", "tool versions").
		return true
	case i > 1 && baseForm(w) && plural(prev) && (prepositions[next] || objectDeterminers[next]) && !anyFunctionWord(ws[:i]):
		// "Benchmark numbers come from a laptop": a verb without -s
		// agrees with the plural that opens the clause and takes a
		// complement; a plural after a determiner or a preposition
		// modifies the next noun ("to the metrics backend every …").
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
		if plural(prev) || givingVerbs[ws[0]] && objectDeterminers[next] {
			// "give external calls a deadline": two objects.
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

// baseForm reports whether w may be a verb's base form: a word of
// letters without the endings of a participle, a plural, an adverb or an
// adjective ("optional", "active", "stable"), and not a word of the
// grammar or a particle ("pass timeouts down through …").
func baseForm(w string) bool {
	if len(w) < 3 || functionWord(w) || particles[w] || thirdPerson(w) || participle(w) || adjective(w) ||
		strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) >= 0 {
		return false
	}
	for _, suffix := range []string{"ly", "al", "ive", "able", "ible", "ic", "ent", "ant", "ary", "ory"} {
		if strings.HasSuffix(w, suffix) {
			return false
		}
	}
	return true
}

// abstractNoun reports whether w has the ending of an abstract noun
// ("cardinality", "latency", "deployment"), which heads a noun phrase rather
// than modifying the next noun; not -ion ("function calls").
func abstractNoun(w string) bool {
	for _, suffix := range []string{"ity", "ness", "ment", "ance", "ence", "ency", "ancy", "ship"} {
		if len(w) > len(suffix)+2 && strings.HasSuffix(w, suffix) {
			return true
		}
	}
	return false
}

// anyFunctionWord reports whether one of ws is a function word.
func anyFunctionWord(ws []string) bool {
	for _, w := range ws {
		if functionWord(w) {
			return true
		}
	}
	return false
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
