package console

import (
	"bytes"
	"strings"
	"testing"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// The evidence guard only informs: a failed one is a warning on the
// proposal page and in the queue, never counted among the failed guards
// that hold a proposal.
func TestAFailedEvidenceGuardIsAWarningNotAFailure(t *testing.T) {
	pg, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	p := &preceptv1.Proposal{ProposalId: "p-1", Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING, RuleContent: "Give every call a timeout.",
		Guards: []*preceptv1.GuardResult{
			{Guard: "evidence", Reason: "goes beyond the evidence: “disable TLS verification” is asked for by no comment of it"},
			{Guard: "quality", Passed: true},
		}}
	render := func(name string, data any) string {
		var buf bytes.Buffer
		if err := pg[name].ExecuteTemplate(&buf, "layout.html", &view{Title: name, Data: data}); err != nil {
			t.Fatalf("render %s: %v", name, err)
		}
		return buf.String()
	}
	page := render("proposal", proposalData{P: p, Pending: true})
	if !strings.Contains(page, `<td data-label="Guard">evidence</td><td data-label="Result"><span class="badge warn">warn</span>`) ||
		strings.Contains(page, `badge bad">failed`) {
		t.Errorf("proposal page does not show the evidence guard as a warning:\n%s", page)
	}
	queue := render("queue", queueData{Proposals: []*preceptv1.Proposal{p}, Total: 1})
	if strings.Contains(queue, "of 2 failed") || !strings.Contains(queue, "none failed") || !strings.Contains(queue, `<span class="badge warn">warn</span> goes beyond the evidence`) {
		t.Errorf("queue counts the evidence guard as failed:\n%s", queue)
	}
}
