package slackapp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// rendered renders p as the fake workspace would store it.
func rendered(t *testing.T, p rulefmt.Proposal) fakeslack.Message {
	t.Helper()
	blocks, text, err := proposalMessage(p, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	for _, blk := range blocks {
		if s, ok := blk.(*slack.SectionBlock); ok && s.Text != nil && utf8.RuneCountInString(s.Text.Text) > maxSectionText {
			t.Fatalf("section of %d characters", utf8.RuneCountInString(s.Text.Text))
		}
		if h, ok := blk.(*slack.HeaderBlock); ok && utf8.RuneCountInString(h.Text.Text) > maxHeaderText {
			t.Fatalf("header of %d characters", utf8.RuneCountInString(h.Text.Text))
		}
	}
	return fakeslack.Message{Text: text, Blocks: string(b)}
}

func pendingProposal() rulefmt.Proposal {
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	return rulefmt.Proposal{
		ID: "p-0123456789ab", Kind: rulefmt.KindNewRule, Status: rulefmt.Pending, Revision: 3, ContentRevision: 1,
		Agents: []string{"coding-agent"}, Type: rulefmt.Guideline, Content: "Add unit tests for every new exported function.",
		EvidenceSummary: `3 negative reviews from 3 distinct reviewers. Representative comments: “missing unit tests” — ann.`,
		Support:         3, Reviewers: []string{"ann", "ben", "cat"}, Epics: []string{"E1", "E2"}, ProposedBy: "precept", Priority: "high",
		Required: 2, RuleID: "r-0123456789ab", Branch: "proposal/p-0123456789ab", ReviewURL: "https://git.example.com/org/rules/compare/main...proposal/p-0123456789ab",
		Approvals: []rulefmt.Approval{{Approver: "alice", At: at, Via: rulefmt.ViaSlack}},
	}
}

func TestPendingMessageShowsEvidenceApprovalsAndCurrentButtons(t *testing.T) {
	m := rendered(t, pendingProposal())
	for _, want := range []string{
		"Rule proposal for coding-agent · GUIDELINE", "Add unit tests for every new exported function.",
		"3 decisions", "*Reviewers*\n3 distinct", "*Epics*\n2 distinct", "“missing unit tests” — ann",
		"Branch `proposal/p-0123456789ab`", "<https://git.example.com/org/rules/compare/main...proposal/p-0123456789ab|Open the rule PR>",
		"*Approvals:* 1/2 — alice", "Revision 3",
	} {
		if !m.Shows(want) {
			t.Errorf("message lacks %q:\n%v", want, m.Strings())
		}
	}
	buttons := m.Buttons()
	for _, action := range []string{ActionApprove, ActionReject} {
		v, err := DecodeButtonValue(buttons[action])
		if err != nil || v != (ButtonValue{ProposalID: "p-0123456789ab", Revision: 3, Action: action}) {
			t.Errorf("%s button = %q (%+v, %v)", action, buttons[action], v, err)
		}
	}
	if !strings.Contains(m.Text, "1/2 approvals") {
		t.Errorf("fallback text = %q", m.Text)
	}
}

func TestDecidedMessagesShowTheOutcomeWithoutButtons(t *testing.T) {
	at := time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC)
	approved := pendingProposal()
	approved.Status = rulefmt.Approved
	approved.Approvals = append(approved.Approvals, rulefmt.Approval{Approver: "bob", Note: "Matches our testing policy.", At: at, Via: rulefmt.ViaSlack})
	approved.MergedCommit = "0123456789abcdef0123456789abcdef01234567"
	waiting := approved
	waiting.MergedCommit = ""
	rejected := pendingProposal()
	rejected.Status = rulefmt.Rejected
	rejected.Rejection = &rulefmt.Rejection{Rejector: "carol", Reason: "Too broad: generated code is exempt.", At: at, Via: rulefmt.ViaAPI}
	for _, tc := range []struct {
		name string
		p    rulefmt.Proposal
		want []string
	}{
		{"approved and merged", approved, []string{":white_check_mark: *Approved* — 2/2", "alice via slack", "bob via slack", "“Matches our testing policy.”", "Rule `r-0123456789ab` is on main (commit `0123456789`)", "<!date^" + itoa(at.Unix())}},
		{"approved, waiting for the merge", waiting, []string{"*Approved*", "waits to be merged into main"}},
		{"rejected", rejected, []string{":x: *Rejected* by carol via api", "> Too broad: generated code is exempt.", "2026-11-20 10:30 UTC"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := rendered(t, tc.p)
			for _, want := range tc.want {
				if !m.Shows(want) {
					t.Errorf("message lacks %q:\n%v", want, m.Strings())
				}
			}
			if len(m.Buttons()) != 0 {
				t.Errorf("a decided proposal has buttons: %v", m.Buttons())
			}
		})
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestTextFromReviewersAndModelsCannotMentionOrLink(t *testing.T) {
	p := pendingProposal()
	p.Content = "Ping <!channel> and <@U0BOSS>; see <https://evil.example|docs> & more"
	p.EvidenceSummary = "“<!here> urgent” — <@U0X>"
	p.Approvals = []rulefmt.Approval{{Approver: "<!everyone>", Via: rulefmt.ViaSlack}}
	p.ReviewURL = "https://git.example.com/x|<!channel>"
	m := rendered(t, p)
	for _, s := range m.Strings() {
		for _, bad := range []string{"<!channel>", "<@U0BOSS>", "<https://evil", "<!here>", "<@U0X>", "<!everyone>", "|<!channel>"} {
			if strings.Contains(s, bad) {
				t.Fatalf("message carries %q unescaped: %q", bad, s)
			}
		}
	}
	if !m.Shows("Ping &lt;!channel&gt; and &lt;@U0BOSS&gt;") || !m.Shows("&amp; more") {
		t.Fatalf("content not escaped as expected: %v", m.Strings())
	}
	if m.Shows("Open the rule PR") {
		t.Fatal("an unsafe review URL became a link")
	}
}

func TestLongContentAndManyConflictsStayWithinBlockKitLimits(t *testing.T) {
	p := pendingProposal()
	p.Content = strings.Repeat("Always validate the input before use. ", 200)
	p.EvidenceSummary = strings.Repeat("ünïcödé evidence ", 400)
	p.Protected, p.Required = true, 3
	p.Supersedes = []string{"r-old1", "r-old2"}
	for i := range 8 {
		p.Conflicts = append(p.Conflicts, rulefmt.ConflictReport{OtherID: "r-x" + itoa(int64(i)), Kind: rulefmt.ConflictOverlap, Similarity: 0.81, Explanation: "same insertion point"})
	}
	m := rendered(t, p)
	for _, want := range []string{"*Supersedes:* r-old1, r-old2", "• overlap with `r-x0` (similarity 0.81): same insertion point", "• … and 3 more", "protected: needs 3 approvals", "*Approvals:* 1/3"} {
		if !m.Shows(want) {
			t.Errorf("message lacks %q", want)
		}
	}
	if utf8.RuneCountInString(m.Text) > maxFallbackText {
		t.Errorf("fallback of %d characters", utf8.RuneCountInString(m.Text))
	}
}

func TestFingerprintChangesWithWhatTheMessageShows(t *testing.T) {
	p := pendingProposal()
	fp := func(p rulefmt.Proposal) string {
		t.Helper()
		blocks, text, err := proposalMessage(p, "")
		if err != nil {
			t.Fatal(err)
		}
		f, err := fingerprint(blocks, text)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f1, f2 := fp(p), fp(p)
	if f1 != f2 {
		t.Fatal("fingerprint is not stable")
	}
	p.MergedCommit = "abc"
	p.Status = rulefmt.Approved
	if f1 == fp(p) {
		t.Fatal("fingerprint ignores the outcome")
	}
}
