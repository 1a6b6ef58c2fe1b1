package lesson

import "testing"

// TestCuesCountByTheirSense: a negation binds the word after it only, and
// a cue of one or common words counts in full when the rest of a long
// comment agrees; a short comment keeps its one cue.
func TestCuesCountByTheirSense(t *testing.T) {
	c := NewClassifier(DefaultTaxonomy())
	for _, tc := range []struct{ comment, not, want string }{
		// "not ... closing" is not "not closed": no resource is left open.
		{"Not a fit for this project, so I'm closing the PR.", "resource-leak", ""},
		// "deprecated" in the sense of an API's life cycle, not of stale
		// context.
		{"Please mark the old endpoints as deprecated for one release before you delete them; clients calling them today would break without warning.", "context-wrong", "breaking-change"},
		{"nit: magic number", "", "magic-values"},
		{"commented-out block", "", "comments-noise"},
	} {
		r := c.Classify(Input{Comment: tc.comment})
		if (tc.not != "" && r.Category == tc.not) || (tc.want != "" && r.Category != tc.want) {
			t.Errorf("%q: %s %v %v, want %q and not %q", tc.comment, r.Category, r.Alternatives, r.Evidence, tc.want, tc.not)
		}
	}
}

// TestReviewerStateNamesNoDefect: what a reviewer says about themselves
// or the thread leaves a comment unclear, and does not hide the defect a
// comment names beside it.
func TestReviewerStateNamesNoDefect(t *testing.T) {
	c := NewClassifier(DefaultTaxonomy())
	for _, tc := range []struct{ comment, want string }{
		{"Hi! I'm really confused by this patch. Why would we merge it?", Unclear},
		{"I was baffled by this change, honestly.", Unclear},
		{"I'm lost in all the commented-out blocks in this file; delete them, the history keeps them.", "comments-noise"},
	} {
		if r := c.Classify(Input{Comment: tc.comment}); r.Category != tc.want {
			t.Errorf("%q: %s %v %v, want %s", tc.comment, r.Category, r.Alternatives, r.Evidence, tc.want)
		}
	}
}
