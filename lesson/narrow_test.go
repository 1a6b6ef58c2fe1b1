package lesson

import (
	"slices"
	"testing"
)

func TestNarrowKeepsTheClausesTheEvidenceNames(t *testing.T) {
	retry, _ := DefaultTaxonomy().Category("retry-timeout")
	secrets, _ := DefaultTaxonomy().Category("secrets-exposed")
	tests := []struct {
		name     string
		rule     string
		evidence []string
		want     string
		left     []string
	}{
		{
			name:     "timeouts asked, retries not",
			rule:     retry.Rule,
			evidence: []string{"The HTTP client has no timeout and requests can hang forever; always set a timeout."},
			want:     "Give every network or external call a timeout or deadline (client timeout or context).",
			left:     []string{"retry only idempotent operations on transient errors, with a maximum number of attempts, exponential backoff and jitter"},
		},
		{
			name:     "retries asked, timeouts not",
			rule:     retry.Rule,
			evidence: []string{"this retry loop hammers the server with no backoff at all"},
			want:     "Retry only idempotent operations on transient errors, with a maximum number of attempts, exponential backoff and jitter.",
			left:     []string{"Give every network or external call a timeout or deadline (client timeout or context)"},
		},
		{
			name:     "both asked: the rule as written",
			rule:     retry.Rule,
			evidence: []string{"no timeout on the client", "and the retries need a backoff"},
			want:     retry.Rule,
		},
		{
			name:     "nothing named: nothing kept",
			rule:     retry.Rule,
			evidence: []string{"this is wrong, please fix"},
			want:     "",
			left: []string{"Give every network or external call a timeout or deadline (client timeout or context)",
				"retry only idempotent operations on transient errors, with a maximum number of attempts, exponential backoff and jitter"},
		},
		{
			// "operation" and "number" stand in several canonical rules:
			// one of them alone is no request for retries.
			name: "a word in passing does not ask for a clause",
			rule: retry.Rule,
			evidence: []string{"a number of these outbound requests have no timeout at all",
				"this operation blocks forever when the upstream stalls, set a timeout pls"},
			want: "Give every network or external call a timeout or deadline (client timeout or context).",
			left: []string{"retry only idempotent operations on transient errors, with a maximum number of attempts, exponential backoff and jitter"},
		},
		{
			name: "a clause that refers back stays with the one before it",
			rule: secrets.Rule,
			// "load them from the environment" leans on the first clause.
			evidence: []string{"the API password is in config.yaml"},
			want:     "Never put credentials, tokens, passwords or private keys in source, config files, fixtures or documentation; load them from the environment or the secret manager, redact them from logs, errors and responses, keep internal hostnames, links and infrastructure details out of public docs and examples (use placeholders).",
			left:     []string{"rotate any secret that was committed"},
		},
		{
			name:     "each one refers back",
			rule:     "Re-read the ticket and check every requirement; implement each one or say which is not done.",
			evidence: []string{"did you read the ticket at all?"},
			want:     "Re-read the ticket and check every requirement; implement each one or say which is not done.",
		},
		{
			name:     "a scope that governs every clause: not cut",
			rule:     "When returning an error, wrap it with what was being done, keep the original cause, and use an error type callers can match.",
			evidence: []string{"callers cannot match on this"},
			want:     "When returning an error, wrap it with what was being done, keep the original cause, and use an error type callers can match.",
		},
		{
			name:     "a list of things after \", and\" is not an instruction",
			rule:     "Never build SQL by concatenating input; use parameterised queries, argument lists without a shell, and context-aware escaping.",
			evidence: []string{"you must escape the HTML here"},
			want:     "Use parameterised queries, argument lists without a shell, and context-aware escaping.",
			left:     []string{"Never build SQL by concatenating input"},
		},
		{
			name:     "separators inside code spans, quotes and asides do not cut",
			rule:     "Wrap it as `a; b, and c` and say \"x; y\" - e.g. this; that - and more, and keep the cause.",
			evidence: []string{"keep the cause"},
			want:     "Keep the cause.",
			left:     []string{"Wrap it as `a; b, and c` and say \"x; y\" - e.g. this; that - and more"},
		},
		{
			name:     "one clause",
			rule:     "Close every file you open.",
			evidence: []string{"the file handle is never closed"},
			want:     "Close every file you open.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Narrow(tt.rule, tt.evidence)
			if got.Text != tt.want || !slices.Equal(got.Left, tt.left) {
				t.Fatalf("Narrow = %q, left %q\nwant  %q, left %q", got.Text, got.Left, tt.want, tt.left)
			}
		})
	}
}

func TestGenericTermsDoNotNameAClause(t *testing.T) {
	retry, _ := DefaultTaxonomy().Category("retry-timeout")
	// "errors" and "call" stand in many canonical rules: they say nothing
	// about which clause a reviewer meant.
	if !genericTerms()["error"] || !genericTerms()["call"] {
		t.Fatalf("generic terms = %v", genericTerms())
	}
	got := Narrow(retry.Rule, []string{"this call returns errors"})
	if got.Text != "" {
		t.Fatalf("Narrow = %q, want nothing kept", got.Text)
	}
}

// Two design reviews ask why a document invents a format instead of
// weighing the standards that exist. "existing" is in the rule about
// reusing the codebase's helpers too, but one shared word that several
// canonical rules use is no request to search the codebase.
func TestADesignReviewAboutStandardsDoesNotAskForCodebaseHelpers(t *testing.T) {
	reuse, ok := DefaultTaxonomy().Category("context-ignored")
	if !ok {
		t.Fatal("no context-ignored category")
	}
	evidence := []string{
		"Why does this doc define a brand new wire format? I'd expect a comparison with the existing standards before we commit to our own.",
		"Section 3 invents its own encoding. What about the existing standards - were they considered, and why were they rejected?",
	}
	if got := Narrow(reuse.Rule, evidence); got.Text != "" || len(got.Kept) != 0 {
		t.Fatalf("Narrow = %q (kept %+v), want nothing of the codebase rule", got.Text, got.Kept)
	}
}

func TestSupportsNamesTheEvidenceBehindEachClause(t *testing.T) {
	retry, _ := DefaultTaxonomy().Category("retry-timeout")
	got := Supports(retry.Rule+"; here: set a timeout on outbound calls", []string{
		"the client has no timeout",
		"nothing here retries, fine",
		"please set a timeout on outbound calls",
	})
	if len(got) != 3 {
		t.Fatalf("Supports = %+v, want 3 clauses", got)
	}
	if !slices.Equal(got[0].Evidence, []int{0, 2}) || !slices.Contains(got[0].Words, "timeout") {
		t.Errorf("timeout clause = %+v", got[0])
	}
	if !slices.Equal(got[1].Evidence, []int{1}) || !slices.Equal(got[1].Words, []string{"retri"}) {
		t.Errorf("retry clause = %+v", got[1])
	}
	if !slices.Equal(got[2].Evidence, []int{0, 2}) {
		t.Errorf("reviewers' clause = %+v", got[2])
	}
}
