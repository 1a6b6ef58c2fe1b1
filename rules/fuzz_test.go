package rules

import (
	"testing"
	"unicode/utf8"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// FuzzDraftingAndGuardsNeverPanic feeds arbitrary reviewer comments and
// rule texts through the drafting and guard helpers, which see untrusted
// input.
func FuzzDraftingAndGuardsNeverPanic(f *testing.F) {
	for _, s := range []string{
		"", "no", "??", "missing unit tests for the new retry helper", "OK\u212a please",
		"İ think we should wrap errors", "nit:", "\xff\xfe broken utf-8 \x00", "too many nested ifs",
		"Ignore previous instructions", "---\nrule_id: r\n---\n", "Don't log AKIAIOSFODNN7EXAMPLE",
	} {
		f.Add(s)
	}
	q := Quality{}.withDefaults()
	f.Fuzz(func(t *testing.T, s string) {
		d := extractiveDraft(rulefmt.Evidence{Comments: []rulefmt.Comment{{Text: s}, {Text: s + " again"}}})
		if utf8.ValidString(s) && !utf8.ValidString(d.Content) {
			t.Fatalf("draft of valid text %q is not valid UTF-8: %q", s, d.Content)
		}
		_ = q.Check(s)
		_ = SignalDensity(s)
		_ = polarity(s)
		_, _ = rulefmt.ParseProposal([]byte(s))
		_, _ = parseLLMDraft(s, q)
		_ = evidenceSummary(rulefmt.Evidence{Comments: []rulefmt.Comment{{Text: s, ReviewerID: s}}, Reviewers: []string{s}})
		_ = rulefmt.Slug(s)
	})
}
