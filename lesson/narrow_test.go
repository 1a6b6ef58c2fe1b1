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
			name:     "nothing named: the rule whole",
			rule:     retry.Rule,
			evidence: []string{"this is wrong, please fix"},
			want:     retry.Rule,
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
			rule:     "Check every returned error.",
			evidence: []string{"unchecked error"},
			want:     "Check every returned error.",
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
	if got.Text != retry.Rule {
		t.Fatalf("Narrow = %q, want the rule whole", got.Text)
	}
}
