package lesson

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/precept-dev/precept/lib/english"
	"github.com/precept-dev/precept/lib/text"
)

// Narrowed is what a category's canonical rule says that the evidence
// asks for (docs/lessons.md, "Rules no wider than the evidence").
type Narrowed struct {
	// Text is the kept clauses joined into one instruction: the whole
	// rule when the evidence supports every clause, "" when it supports
	// none.
	Text string
	// Kept are the clauses kept, each with the evidence behind it.
	Kept []Support
	// Left are the clauses left out: guidance no comment of the evidence
	// supports.
	Left []string
}

// Support is one clause of a rule text and the evidence that asks for
// it.
type Support struct {
	Clause string
	// Evidence are the indexes of the evidence texts that support the
	// clause; none when nothing does.
	Evidence []int
	// Words are the terms those texts share with the clause, sorted.
	Words []string
}

// Supported reports whether some evidence asks for the clause.
func (s Support) Supported() bool { return len(s.Evidence) > 0 }

// Narrow keeps the clauses of a canonical rule that the evidence
// supports. A rule is cut into clauses as Supports cuts it. When the
// evidence supports every clause the rule is kept as written; when it
// supports none, Text is empty: the canonical guidance says nothing the
// reviewers asked for, and the caller drafts from their words.
func Narrow(rule string, evidence []string) Narrowed {
	rule = strings.TrimSpace(rule)
	units := Supports(rule, evidence)
	var out Narrowed
	var kept []string
	for _, u := range units {
		if u.Supported() {
			kept = append(kept, u.Clause)
			out.Kept = append(out.Kept, u)
		} else {
			out.Left = append(out.Left, strings.TrimRight(u.Clause, ". "))
		}
	}
	switch {
	case len(kept) == 0:
		return out
	case len(out.Left) == 0:
		out.Text = rule
		if len(out.Kept) == 1 {
			out.Kept[0].Clause = rule
		}
		return out
	}
	out.Text = text.UpperFirst(strings.Join(kept, "; "))
	if !strings.HasSuffix(out.Text, ".") {
		out.Text += "."
	}
	return out
}

// Supports cuts a rule text into clauses and says which evidence texts
// support each (ruleClauses cuts). An evidence text supports a clause
// when it shares with it two distinctive terms, or one rare term
// (stemmed as the classifier reads text; found in at most rareShare of
// the canonical rules, or in none). Terms found in many canonical rules,
// such as "error" or "every", do not count: they say nothing about which
// clause a reviewer meant.
func Supports(rule string, evidence []string) []Support {
	return SupportsFirmly(rule, evidence, nil)
}

// SupportsFirmly is Supports where firm names the clauses one rare term
// cannot support: for them an evidence text must share two distinctive
// terms. Clauses written by an edit or a model are firm (docs/lessons.md,
// "Rules no wider than the evidence"): one shared word is easy to keep
// while the clause asks for something else. firm may be nil.
func SupportsFirmly(rule string, evidence []string, firm func(clause string) bool) []Support {
	rule = strings.TrimSpace(rule)
	units := ruleClauses(rule)
	said := make([]map[string]bool, len(evidence))
	for i, e := range evidence {
		said[i] = map[string]bool{}
		for _, t := range terms(e, nil) {
			said[i][t] = true
		}
	}
	generic, df := genericTerms(), ruleFrequencies()
	rare := rareShare * float64(len(DefaultTaxonomy().Categories))
	out := make([]Support, 0, len(units))
	for _, u := range units {
		if strings.TrimSpace(u) == "" {
			continue
		}
		s := Support{Clause: u}
		needTwo := firm != nil && firm(u)
		words := map[string]bool{}
		for i, m := range said {
			var shared []string
			strong := false
			for _, t := range terms(u, nil) {
				if !m[t] || generic[t] || t == negation || slices.Contains(shared, t) {
					continue
				}
				shared = append(shared, t)
				strong = strong || float64(df[t]) <= rare
			}
			if (strong && !needTwo) || len(shared) >= 2 {
				s.Evidence = append(s.Evidence, i)
				for _, t := range shared {
					words[t] = true
				}
			}
		}
		s.Words = slices.Sorted(maps.Keys(words))
		out = append(out, s)
	}
	return out
}

// backReferences are words that make a clause lean on the one before it
// ("it must be wrapped", "load them from …", "implement each one").
var backReferences = map[string]bool{"it": true, "its": true, "them": true, "they": true, "their": true, "these": true,
	"those": true, "each": true, "one": true}

// continuations open a clause that continues the list of the clause
// before it rather than giving an instruction ("…: behind a flag; in
// stages …; with a cutover date …").
var continuations = map[string]bool{"in": true, "with": true, "without": true, "by": true, "on": true, "at": true,
	"from": true, "via": true, "through": true, "as": true, "per": true, "behind": true}

// openingAdverbs may come before a clause's verb ("never discard it").
var openingAdverbs = map[string]bool{"never": true, "always": true, "also": true, "then": true, "not": true, "do": true,
	"don't": true, "dont": true}

// scopeOpeners open a sentence with a condition or a place that governs
// all of it ("When …,", "In hot paths …", "Before finishing, …").
var scopeOpeners = map[string]bool{"when": true, "whenever": true, "if": true, "in": true, "before": true, "after": true,
	"besides": true, "for": true, "during": true, "once": true, "unless": true, "while": true}

func opensWithScope(rule string) bool {
	first, _, _ := strings.Cut(rule, " ")
	return scopeOpeners[strings.ToLower(first)]
}

// instructionVerbs open an instruction after "and": besides these, the
// first word of every canonical rule of the embedded taxonomy. Any other
// word after "and" continues a list of things ("…, and context-aware
// escaping"), which is not cut.
var instructionVerbs = sync.OnceValue(func() map[string]bool {
	verbs := map[string]bool{}
	for _, w := range strings.Fields(`add assert avoid cache check cite compute decide define delete deny do document fetch fix
follow format give hoist implement keep leave load make map mark never prefer propose put report reserve respect retry
return rotate run say search shut split state test turn upgrade use verify write allow disable enable ensure ignore
remove skip trust`) {
		verbs[w] = true
	}
	for _, c := range DefaultTaxonomy().Categories {
		if first, _, _ := strings.Cut(c.Rule, " "); !opensWithScope(c.Rule) {
			verbs[strings.ToLower(first)] = true
		}
	}
	return verbs
})

// minWordsBeforeAnd is how many words a clause needs, since its start
// or its last comma, before a bare "and <verb>" for the "and" to start a
// new instruction: "Store and compare timestamps", "parse and format",
// "stop work and return" or "the tone the audience and document type
// call for" are one.
const minWordsBeforeAnd = 5

// ruleClauses cuts a rule into its instructions, each without the
// separator that joined it (docs/lessons.md, "Rules no wider than the
// evidence"). A text is cut into sentences, at a sentence's end and at
// every line break; a sentence at its semicolons and where "and" or
// "also" joins a new instruction (", and <verb>", "and also …", ", also
// …", or "<five words or more> and <verb>"). A sentence that opens with
// a scope ("When …,", "In hot paths …") is cut at its semicolons and at
// "also" only: the scope holds for the rest of it. A clause that opens
// by referring back ("it must …", "load them …", "never discard it")
// or continues its list ("in stages …") stays with the one before it in
// its sentence. Separators inside
// closed parentheses, brackets, quotes, code spans or, within a
// sentence, a dashed aside do not cut.
func ruleClauses(rule string) []string {
	var units []string
	for _, sentence := range sentences(rule) {
		for i, p := range sentenceClauses(sentence, opensWithScope(sentence)) {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if i > 0 && len(units) > 0 && refersBack(p) {
				units[len(units)-1] += "; " + p
				continue
			}
			units = append(units, p)
		}
	}
	return units
}

// abbreviations end in a full stop that ends no sentence.
var abbreviations = map[string]bool{"e.g": true, "i.e": true, "eg": true, "ie": true, "etc": true, "vs": true, "cf": true,
	"approx": true, "incl": true, "resp": true}

// sentences cuts a text after each full stop, question or exclamation
// mark followed by a space, and at each line break, outside closed
// parentheses, brackets, quotes and code spans.
func sentences(s string) []string {
	in := shielded(s)
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if in[i] {
			continue
		}
		switch c := s[i]; {
		case c == '\n' || c == '\r':
			out = append(out, s[start:i])
			start = i + 1
		case (c == '.' || c == '!' || c == '?') && i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '\t' || s[i+1] == '\n'):
			if c == '.' && abbreviated(s[start:i]) {
				continue
			}
			out = append(out, s[start:i+1])
			start = i + 1
		}
	}
	out = append(out, s[start:])
	var kept []string
	for _, p := range out {
		if p = strings.TrimSpace(p); p != "" {
			kept = append(kept, p)
		}
	}
	return kept
}

// abbreviated reports whether the text before a full stop ends in an
// abbreviation ("e.g", "etc") or a single letter.
func abbreviated(before string) bool {
	word := before[strings.LastIndexAny(before, " \t(")+1:]
	word = strings.ToLower(word)
	return abbreviations[word] || len(word) == 1 || strings.Contains(word, ".")
}

// shielded marks the bytes of s inside a closed pair of parentheses,
// brackets, double quotes or backticks. An opener never closed shields
// nothing: it must not hide the rest of a text from the cutting.
func shielded(s string) []bool {
	in := make([]bool, len(s))
	for i := 0; i < len(s); i++ {
		open := s[i]
		var closeWith byte
		switch open {
		case '`', '"':
			closeWith = open
		case '(':
			closeWith = ')'
		case '[':
			closeWith = ']'
		default:
			continue
		}
		depth, end := 0, -1
		for j := i + 1; j < len(s) && end < 0; j++ {
			switch {
			case s[j] == closeWith && depth == 0:
				end = j
			case s[j] == closeWith:
				depth--
			case s[j] == open && open != closeWith:
				depth++
			}
		}
		if end < 0 {
			continue
		}
		for k := i + 1; k < end; k++ {
			in[k] = true
		}
		i = end
	}
	return in
}

// sentenceClauses cuts one sentence at its separators (ruleClauses);
// scoped, at semicolons and "also" only.
func sentenceClauses(s string, scoped bool) []string {
	in := shielded(s)
	var parts []string
	// words counts the words of the clause since its start or its last
	// comma.
	aside, start, words := false, 0, 1
	cut := func(i, skip int) {
		parts = append(parts, s[start:i])
		start, words = i+skip, 1
	}
	for i := 0; i < len(s); i++ {
		rest := s[i:]
		switch {
		case in[i]:
		case strings.HasPrefix(rest, " - "):
			// A dash opens or closes an aside (" - e.g. … - ").
			aside = !aside
		case aside:
		case s[i] == ';':
			cut(i, 1)
		case strings.HasPrefix(rest, ", also "):
			cut(i, len(", also "))
		case strings.HasPrefix(rest, " and also "):
			cut(i, len(" and also "))
		case s[i] == ',':
			if !scoped && strings.HasPrefix(rest, ", and ") && startsInstruction(rest[len(", and "):]) {
				cut(i, len(", and "))
				continue
			}
			words = 0
		case s[i] == ' ':
			if !scoped && strings.HasPrefix(rest, " and ") && words >= minWordsBeforeAnd && startsInstruction(rest[len(" and "):]) {
				cut(i, len(" and "))
				continue
			}
			words++
		}
	}
	return append(parts, s[start:])
}

func startsInstruction(s string) bool {
	next := strings.Fields(s)
	return len(next) > 0 && instructionVerbs()[strings.ToLower(next[0])]
}

// refersBack reports whether a clause opens by referring back: its first
// word, or the one after its opening verb ("load them", "never discard
// it"), is a back-reference, or it opens with a preposition that
// continues the clause before (continuations). A back-reference further
// on ("… for each host") does not lean on the clause before.
func refersBack(clause string) bool {
	words := english.Tokens(clause, english.Options{Keep: "'"})
	if len(words) > 0 && continuations[words[0]] {
		return true
	}
	for len(words) > 0 && openingAdverbs[words[0]] {
		words = words[1:]
	}
	for i, w := range words {
		if i > 1 {
			break
		}
		if backReferences[w] {
			return true
		}
	}
	return false
}

// genericShare is the share of the embedded taxonomy's canonical rules a
// term may appear in and still tell one clause from another.
const genericShare = 0.08

// rareShare is the share of the embedded taxonomy's canonical rules a
// term may appear in and still support a clause alone.
const rareShare = 0.04

// genericTerms are the terms of the embedded taxonomy's canonical rules
// that appear in more than genericShare of them.
var genericTerms = sync.OnceValue(func() map[string]bool {
	cats := DefaultTaxonomy().Categories
	out := map[string]bool{}
	for t, n := range ruleFrequencies() {
		if float64(n) > genericShare*float64(len(cats)) {
			out[t] = true
		}
	}
	return out
})

// ruleFrequencies counts, for each term, the embedded taxonomy's
// canonical rules it appears in.
var ruleFrequencies = sync.OnceValue(func() map[string]int {
	df := map[string]int{}
	for _, c := range DefaultTaxonomy().Categories {
		seen := map[string]bool{}
		for _, t := range terms(c.Rule, nil) {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	return df
})
