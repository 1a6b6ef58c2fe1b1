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
// support each. A text is cut at its semicolons and at ", and" before an
// instruction verb; a clause that refers back ("never discard it") stays
// with the one before it, and a text that opens with a scope ("When
// …,", "In hot paths …") is one clause. An evidence text supports a
// clause when it shares with it two distinctive terms, or one rare term
// (stemmed as the classifier reads text; found in at most rareShare of
// the canonical rules, or in none). Terms found in many canonical rules,
// such as "error" or "every", do not count: they say nothing about which
// clause a reviewer meant.
func Supports(rule string, evidence []string) []Support {
	rule = strings.TrimSpace(rule)
	units := []string{rule}
	if !opensWithScope(rule) {
		// "When returning an error, wrap it …, and use an error type":
		// the scope holds for every clause, and a clause cut from it
		// would say more than the rule.
		units = ruleClauses(rule)
	}
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
			if strong || len(shared) >= 2 {
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
