package lesson

import (
	"slices"
	"strings"
	"sync"

	"github.com/precept-dev/precept/lib/english"
	"github.com/precept-dev/precept/lib/text"
)

// Narrowed is what a category's canonical rule says that the evidence
// asks for (docs/lessons.md, "Rules no wider than the evidence").
type Narrowed struct {
	// Text is the kept clauses joined into one instruction; the whole
	// rule when the evidence names none of its parts.
	Text string
	// Left are the clauses left out: guidance no comment of the evidence
	// names.
	Left []string
}

// Narrow keeps the clauses of a canonical rule that the evidence names.
// A rule is cut into clauses at its semicolons and at ", and" before an
// instruction verb; a clause that refers back ("never discard it") stays
// with the one before it, and a rule that opens with a scope ("When …,",
// "In hot paths …") is not cut. A clause is named when a comment shares
// one of its distinctive terms with it (stemmed as the classifier reads text;
// terms found in many canonical rules, such as "error" or "every", do
// not count). When the evidence names no clause, nothing tells the
// clauses apart, and when it names every clause, nothing is left out:
// either way the rule is kept as written.
func Narrow(rule string, evidence []string) Narrowed {
	rule = strings.TrimSpace(rule)
	if opensWithScope(rule) {
		// "When returning an error, wrap it …, and use an error type":
		// the scope holds for every clause, and a clause cut from it
		// would say more than the rule.
		return Narrowed{Text: rule}
	}
	units := ruleClauses(rule)
	if len(units) < 2 {
		return Narrowed{Text: rule}
	}
	said := map[string]bool{}
	for _, e := range evidence {
		for _, t := range terms(e, nil) {
			said[t] = true
		}
	}
	generic := genericTerms()
	named := make([]bool, len(units))
	for i, u := range units {
		named[i] = slices.ContainsFunc(terms(u, nil), func(t string) bool { return said[t] && !generic[t] && t != negation })
	}
	if !slices.Contains(named, true) || !slices.Contains(named, false) {
		return Narrowed{Text: rule}
	}
	var kept []string
	var out Narrowed
	for i, u := range units {
		if named[i] {
			kept = append(kept, u)
		} else {
			out.Left = append(out.Left, strings.TrimRight(u, ". "))
		}
	}
	out.Text = text.UpperFirst(strings.Join(kept, "; "))
	if !strings.HasSuffix(out.Text, ".") {
		out.Text += "."
	}
	return out
}

// backReferences are words that make a clause lean on the one before it
// ("never discard it", "implement each one").
var backReferences = map[string]bool{"it": true, "its": true, "them": true, "they": true, "their": true, "these": true,
	"those": true, "each": true, "one": true}

// scopeOpeners open a rule with a condition or a place that governs all
// of it ("When …,", "In hot paths …", "Before finishing, …").
var scopeOpeners = map[string]bool{"when": true, "whenever": true, "if": true, "in": true, "before": true, "after": true,
	"besides": true, "for": true, "during": true, "once": true, "unless": true, "while": true}

func opensWithScope(rule string) bool {
	first, _, _ := strings.Cut(rule, " ")
	return scopeOpeners[strings.ToLower(first)]
}

// instructionVerbs open an instruction after ", and": besides these, the
// first word of every canonical rule of the embedded taxonomy. Any other
// word after ", and" continues a list of things ("…, and context-aware
// escaping"), which is not cut.
var instructionVerbs = sync.OnceValue(func() map[string]bool {
	verbs := map[string]bool{}
	for _, w := range strings.Fields(`add assert avoid cache check cite compute decide define delete deny do document fetch fix
follow format give hoist implement keep leave load make map mark never prefer propose put report reserve respect retry
return rotate run say search shut split state test turn upgrade use verify write`) {
		verbs[w] = true
	}
	for _, c := range DefaultTaxonomy().Categories {
		if first, _, _ := strings.Cut(c.Rule, " "); !opensWithScope(c.Rule) {
			verbs[strings.ToLower(first)] = true
		}
	}
	return verbs
})

// ruleClauses cuts a rule into its instructions, each without the
// separator that joined it, a clause that refers back glued to the one
// before it. Separators inside parentheses, brackets, quotes, code
// spans or a dashed aside do not cut.
func ruleClauses(rule string) []string {
	var parts []string
	depth, quote, aside, start := 0, byte(0), false, 0
	for i := 0; i < len(rule); i++ {
		switch c := rule[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '`' || c == '"':
			quote = c
		case c == '(' || c == '[':
			depth++
		case (c == ')' || c == ']') && depth > 0:
			depth--
		case strings.HasPrefix(rule[i:], " - "):
			// A dash opens or closes an aside (" - e.g. … - ").
			aside = !aside
		case depth > 0 || aside:
		case c == ';':
			parts = append(parts, rule[start:i])
			start = i + 1
		case strings.HasPrefix(rule[i:], ", and "):
			next := strings.Fields(rule[i+len(", and "):])
			if len(next) > 0 && instructionVerbs()[strings.ToLower(next[0])] {
				parts = append(parts, rule[start:i])
				start = i + len(", and ")
			}
		}
	}
	parts = append(parts, rule[start:])
	var units []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if len(units) > 0 && refersBack(p) {
			units[len(units)-1] += "; " + p
			continue
		}
		units = append(units, p)
	}
	return units
}

func refersBack(clause string) bool {
	for _, w := range english.Tokens(clause, english.Options{}) {
		if backReferences[w] {
			return true
		}
	}
	return false
}

// genericShare is the share of the embedded taxonomy's canonical rules a
// term may appear in and still tell one clause from another.
const genericShare = 0.08

// genericTerms are the terms of the embedded taxonomy's canonical rules
// that appear in more than genericShare of them.
var genericTerms = sync.OnceValue(func() map[string]bool {
	cats := DefaultTaxonomy().Categories
	df := map[string]int{}
	for _, c := range cats {
		seen := map[string]bool{}
		for _, t := range terms(c.Rule, nil) {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	out := map[string]bool{}
	for t, n := range df {
		if float64(n) > genericShare*float64(len(cats)) {
			out[t] = true
		}
	}
	return out
})
