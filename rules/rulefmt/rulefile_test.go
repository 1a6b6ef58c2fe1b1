package rulefmt

import (
	"strings"
	"testing"
	"time"
)

func TestRuleFilesRoundTrip(t *testing.T) {
	until := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := Rule{
		ID: "r-1", ProposalID: "p-1", Agents: []string{"coding-agent"}, Type: Constraint,
		InsertionPoint: DefaultInsertionPoint, Status: Shadow, Importance: Important, Confidence: 0.82,
		Frequency: 2, FeedbackIDs: []string{"d-1", "d-2"}, ShadowUntil: &until,
		Approvals: []Approval{{Approver: "alice", Note: "good catch", At: until, Via: "slack"}},
		Content:   "Always wrap errors returned from the retry loop.\n\nInclude the attempt count.",
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "---\nrule_id: r-1\n") || !strings.Contains(string(b), "---\n\nAlways wrap") {
		t.Fatalf("rendered:\n%s", b)
	}
	got, err := ParseRule(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != r.Content || got.Status != Shadow || !got.ShadowUntil.Equal(until) || got.Approvals[0].Note != "good catch" || got.Importance != Important {
		t.Fatalf("parsed = %+v", got)
	}
}

func TestHandEditedRuleFilesParseWithDefaultsAndKeepUnknownKeys(t *testing.T) {
	got, err := ParseRule([]byte("---\r\nrule_id: r-9\r\nagents: [docs-agent]\r\nowner: platform-team\r\n---\r\nKeep headings in sentence case.\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != Active || got.Importance != Normal || got.InsertionPoint != DefaultInsertionPoint || got.Content != "Keep headings in sentence case." {
		t.Fatalf("parsed = %+v", got)
	}
	b, _ := got.Marshal()
	if !strings.Contains(string(b), "owner: platform-team") {
		t.Fatalf("unknown key dropped:\n%s", b)
	}
}

func TestMalformedRuleFilesAreRejected(t *testing.T) {
	for name, in := range map[string]string{
		"no front matter": "just text",
		"unclosed":        "---\nrule_id: r\n",
		"bad yaml":        "---\nrule_id: [\n---\ntext\n",
		"no id":           "---\nagents: [a]\n---\ntext\n",
		"empty text":      "---\nrule_id: r\n---\n\n",
	} {
		if _, err := ParseRule([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestImportanceRanks(t *testing.T) {
	if !(Critical.Rank() > Important.Rank() && Important.Rank() > Normal.Rank() && Normal.Rank() == Importance("").Rank()) {
		t.Fatal("importance ranks out of order")
	}
}
