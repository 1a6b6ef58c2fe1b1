package main

import (
	"strings"
	"testing"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// A held draft lists why it was held; the evidence guard comes first in
// every draft's guards and never holds one.
func TestProposalNoteNamesTheGuardThatHeld(t *testing.T) {
	p := &preceptv1.Proposal{Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_BLOCKED, Guards: []*preceptv1.GuardResult{
		{Guard: "evidence", Passed: false, Reason: "goes beyond the evidence: “retry with backoff” is asked for by no comment of it"},
		{Guard: "safety_floor", Passed: true},
		{Guard: "quality", Passed: false, Reason: "the rule text has 12 characters, fewer than the minimum of 20"},
	}}
	if got := proposalNote(p); !strings.HasPrefix(got, "quality:") {
		t.Errorf("note %q, want the quality guard that held the draft", got)
	}
}
