package lesson

import (
	"cmp"
	"slices"
)

// Cue sense checks (docs/lessons.md, "The classifier"): a cue is a few
// words, and a few common words have more than one sense ("use a set"
// and "set the cause", "closed" bugs and files "never closed"). A cue
// that is one term or only common terms counts in full when the rest of
// the comment agrees, that is when the naive Bayes vote puts its
// category among the first few; otherwise it counts for less. A short
// comment ("nit: magic number") has no rest to agree, so its cues count
// in full.
const (
	// senseCommonIDF is the inverse document frequency under which a
	// term is common in the taxonomy's phrasings and cues.
	senseCommonIDF = 4.5
	// senseAgreeRank is how many of the naive Bayes vote's first
	// categories agree with a cue.
	senseAgreeRank = 3
	// senseShortTerms is the longest comment, in terms, whose cues
	// always count in full.
	senseShortTerms = 6
	// senseDiscount is what a cue that the rest of the comment does not
	// back counts for.
	senseDiscount = 0.4
)

// senseCheck weighs a comment's cues by whether the rest of it agrees.
// The zero value (a diff, a short comment) weighs every cue in full.
type senseCheck struct {
	agree []bool
}

// newSenseCheck is the sense check of a comment of terms ts whose naive
// Bayes posterior is nb.
func newSenseCheck(ts []string, nb []float64) senseCheck {
	if len(ts) <= senseShortTerms {
		return senseCheck{}
	}
	order := make([]int, len(nb))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(nb[b], nb[a]) })
	agree := make([]bool, len(nb))
	for _, ci := range order[:min(senseAgreeRank, len(order))] {
		agree[ci] = nb[ci] > 0
	}
	return senseCheck{agree: agree}
}

// factor is how much of its weight cue cu counts for.
func (s senseCheck) factor(c *Classifier, cu cue) float64 {
	if s.agree == nil || s.agree[cu.category] || !c.ambiguousCue(cu) {
		return 1
	}
	return senseDiscount
}

// ambiguousCue reports whether a cue is one term, or only common terms.
func (c *Classifier) ambiguousCue(cu cue) bool {
	if len(cu.terms) == 1 {
		return true
	}
	for _, t := range cu.terms {
		if t != negation && c.idf[t] >= senseCommonIDF {
			return false
		}
	}
	return true
}

// negationBinds reports whether each negation of a cue is followed, in
// the text, by the cue's next term: a negation folds onto the next
// content word only, so "not a fit for this project, so I'm closing"
// is not "not closed".
func negationBinds(cue []string, pos map[string][]int) bool {
	for i, t := range cue {
		if t != negation || i+1 >= len(cue) {
			continue
		}
		next := cue[i+1]
		if !slices.ContainsFunc(pos[negation], func(p int) bool { return slices.Contains(pos[next], p+1) }) {
			return false
		}
	}
	return true
}
