package metrics_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

type evidence []rulefmt.Evidence

func (e evidence) Generalizable(context.Context) ([]rulefmt.Evidence, error) { return e, nil }

// newManager returns a rule manager on a fresh repository with its
// metrics registered on a fresh registry.
func newManager(t *testing.T, opts rules.Options) (*rules.Manager, *prometheus.Registry) {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	m, err := rules.New(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := metrics.Rules(reg, m, nil); err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func cluster(id string, comments ...string) rulefmt.Evidence {
	ev := rulefmt.Evidence{ClusterID: id, Class: rulefmt.ClassGeneralizableHigh, Confidence: 0.86, Agents: []string{"coding-agent"}, Size: len(comments)}
	for i, c := range comments {
		d := id + "-d" + string(rune('1'+i))
		ev.FeedbackIDs = append(ev.FeedbackIDs, d)
		ev.Comments = append(ev.Comments, rulefmt.Comment{DecisionID: d, ReviewerID: "reviewer-" + string(rune('1'+i)), Agent: "coding-agent", Text: c})
	}
	ev.Reviewers = []string{"reviewer-1", "reviewer-2", "reviewer-3"}
	ev.Epics = []string{"EPIC-1", "EPIC-2"}
	return ev
}

func TestAGuardBlockIsCountedByGuard(t *testing.T) {
	ev := cluster("c-q", "Use the key AKIAIOSFODNN7EXAMPLE to call the staging API.", "staging calls fail", "no access to staging")
	m, reg := newManager(t, rules.Options{Evidence: evidence{ev}})
	out, err := m.ProposeFromEvidence(context.Background())
	if err != nil || len(out) != 1 || out[0].Status != rulefmt.Blocked {
		t.Fatalf("drafted %+v, %v; want one blocked draft", out, err)
	}
	if got := gather(t, reg)["precept_rules_guard_blocks_total"]; got != `{guard="quality"} 1` {
		t.Fatalf("precept_rules_guard_blocks_total = %s", got)
	}
}

func TestApprovalsAreCountedByChannelAndProposalsByStatus(t *testing.T) {
	ctx := context.Background()
	m, reg := newManager(t, rules.Options{})
	alice := precept.Identity{Name: "alice", Role: precept.RoleApprover}
	p, err := m.Propose(ctx, rules.ManualProposal{Agents: []string{"docs-agent", "coding-agent"}, Content: "Spell product names exactly as the glossary does."}, alice)
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.Propose(ctx, rules.ManualProposal{Agents: []string{"coding-agent"}, Content: "Wrap errors returned from the retry loop with the attempt count."}, alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Approve(ctx, rules.ApproveRequest{ProposalID: p.ID, By: "bob", Via: rulefmt.ViaAPI}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Approve(ctx, rules.ApproveRequest{ProposalID: p.ID, By: "carol", Via: rulefmt.ViaSlack}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reject(ctx, rules.RejectRequest{ProposalID: other.ID, By: "bob", Reason: "The linter does it.", Via: rulefmt.ViaSlack}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Rollback(ctx, rules.RollbackRequest{RuleID: p.RuleID, By: "carol", Reason: "Too strict."}); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	want := map[string]string{
		"precept_rules_approvals_total":  `{via="api"} 1; {via="console"} 0; {via="git"} 0; {via="mcp"} 0; {via="slack"} 1`,
		"precept_rules_rejections_total": `{via="api"} 0; {via="console"} 0; {via="git"} 0; {via="mcp"} 0; {via="slack"} 1`,
		"precept_rules_rollbacks_total":  `1`,
		"precept_rules_proposals": `{status="APPROVED"} 1; {status="BLOCKED"} 0; {status="DEFERRED"} 0; ` +
			`{status="MERGED"} 0; {status="PENDING"} 0; {status="REJECTED"} 1`,
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s = %s, want %s", name, got[name], w)
		}
	}
}

// gather renders each metric family of reg as its samples, sorted by
// label, e.g. `{via="api"} 1; {via="slack"} 1`.
func gather(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		var samples []string
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			s := fmt.Sprint(v)
			if len(labels) > 0 {
				s = "{" + strings.Join(labels, ",") + "} " + s
			}
			samples = append(samples, s)
		}
		out[mf.GetName()] = strings.Join(samples, "; ")
	}
	return out
}
