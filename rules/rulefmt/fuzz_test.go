package rulefmt

import (
	"testing"
	"time"
)

// Rule and proposal files read back from a remote are input: whatever
// bytes a push brings, reading them never panics, a file that reads
// renders and reads back the same, and the text an approval binds to is
// computed without failing (docs/decisions/0016-trust-model.md).
func FuzzRuleFilesFromARemote(f *testing.F) {
	p := Proposal{ID: "p-0123456789", Kind: KindNewRule, Status: Pending, Revision: 2, ContentRevision: 1, Agents: []string{"coding-agent"},
		Type: Guideline, Required: 2, Content: "Give every network call a timeout.\n",
		Approvals: []Approval{{Approver: "alice", At: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC), Via: ViaAPI, TextSHA256: "abc"}}}
	seed, _ := p.Marshal()
	f.Add(seed)
	r, _ := Rule{ID: "r-1", ProposalID: "p-1", Agents: []string{"coding-agent"}, Type: Guideline, Status: Active, Content: "Use contexts.\n"}.Marshal()
	f.Add(r)
	f.Add([]byte("---\nproposal_id: [unclosed\n---\n"))
	f.Add([]byte("---\na: &a [x, x]\nb: &b [*a, *a]\nproposal_id: *b\n---\n"))
	f.Add([]byte("---\nproposal_id: p-1\nstatus: APPROVED\napprovals: {approver: 7}\n---\nbody"))
	f.Add([]byte("no front matter at all"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, err := ParseProposal(data); err == nil {
			_ = got.TextSHA256()
			_ = got.ValidApprovals()
			out, err := got.Marshal()
			if err != nil {
				t.Fatalf("a proposal that reads does not render: %v", err)
			}
			again, err := ParseProposal(out)
			if err != nil {
				t.Fatalf("a rendered proposal does not read back: %v\n%s", err, out)
			}
			if again.TextSHA256() != got.TextSHA256() || len(again.Approvals) != len(got.Approvals) || again.Status != got.Status {
				t.Fatalf("read back differently:\n%s\n---\n%s", data, out)
			}
		}
		if got, err := ParseRule(data); err == nil {
			out, err := got.Marshal()
			if err != nil {
				t.Fatalf("a rule that reads does not render: %v", err)
			}
			if _, err := ParseRule(out); err != nil {
				t.Fatalf("a rendered rule does not read back: %v\n%s", err, out)
			}
		}
	})
}
