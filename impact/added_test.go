package impact

import (
	"slices"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// The preview judges added clauses as the evidence guard does: a clause
// of an edited text, or one recorded as an edit's, needs two shared
// terms; one rare word kept from the reviewers' comment is not enough.
func TestAddedClausesOfAnEditNeedFirmSupport(t *testing.T) {
	evidence := []precept.Decision{{ReviewerComment: "the HTTP client has no timeout and requests hang forever"}}
	content := "Give the HTTP client a timeout. Log every timeout at debug level."
	if got := added(content, evidence, nil, false); len(got) != 0 {
		t.Fatalf("added to a drafted text = %q, want none", got)
	}
	want := []string{"Log every timeout at debug level"}
	if got := added(content, evidence, nil, true); !slices.Equal(got, want) {
		t.Errorf("added to an edited text = %q, want %q", got, want)
	}
	known := []rulefmt.Clause{{Text: "Give the HTTP client a timeout", Source: rulefmt.SourceReviewers},
		{Text: "Log every timeout at debug level", Source: rulefmt.SourceEdit}}
	if got := added(content, evidence, known, false); !slices.Equal(got, want) {
		t.Errorf("added with the clause recorded as an edit's = %q, want %q", got, want)
	}
}
