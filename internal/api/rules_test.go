package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules"
)

// The identities of the rule service tests: three approvers and a reader.
var ruleTokens = map[string]string{
	"alice":  "alice-token-0123456789",
	"bob":    "bob-token-0123456789ab",
	"carol":  "carol-token-0123456789",
	"viewer": "viewer-token-012345678",
}

// startRuleServer serves RuleService backed by a real rule manager on a
// fresh rules repository, with the production interceptors.
func startRuleServer(t *testing.T) (string, *gitrepo.Repo) {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	m, err := rules.New(repo, rules.Options{Approvers: []string{"alice", "bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []precept.Credential
	for name, tok := range ruleTokens {
		role := precept.RoleApprover
		if name == "viewer" {
			role = precept.RoleReader
		}
		tokens = append(tokens, credential(name, role, tok))
	}
	auth, err := NewAuthenticator(tokens)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(preceptv1connect.NewRuleServiceHandler(&RuleService{Rules: m, Log: slog.New(slog.DiscardHandler)},
		connect.WithInterceptors(NewMetricsInterceptor(nil), &AuthInterceptor{Auth: auth})))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, repo
}

// ruleClient is a RuleService client authenticated as who, over protocol.
func ruleClient(url, who, protocol string) preceptv1connect.RuleServiceClient {
	var opts []connect.ClientOption
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
		protocols = new(http.Protocols)
		protocols.SetUnencryptedHTTP2(true)
	}
	hc := &http.Client{Transport: &bearer{token: ruleTokens[who], next: &http.Transport{Protocols: protocols}}}
	return preceptv1connect.NewRuleServiceClient(hc, url, opts...)
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestRuleServiceRunsTheLifecycleInTheCallersName(t *testing.T) {
	for _, protocol := range []string{"connect", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			ctx := context.Background()
			url, repo := startRuleServer(t)
			alice, bob, carol, viewer := ruleClient(url, "alice", protocol), ruleClient(url, "bob", protocol), ruleClient(url, "carol", protocol), ruleClient(url, "viewer", protocol)

			proposed, err := carol.ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
				AffectedAgents: []string{"coding-agent"}, RuleType: preceptv1.RuleType_RULE_TYPE_CONSTRAINT,
				RuleContent: "Never log API tokens or passwords, even at debug level.", Rationale: "Two incidents in November.",
				FeedbackIds: []string{"d-1", "d-2"},
			}))
			if err != nil {
				t.Fatal(err)
			}
			p := proposed.Msg.GetProposal()
			if p.GetProposedBy() != "carol" || p.GetStatus() != preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING || p.GetRequiredApprovals() != 2 || p.GetBranch() != "proposal/"+p.GetProposalId() {
				t.Fatalf("proposed = %v", p)
			}
			id := p.GetProposalId()

			// The approver is the caller: carol proposed, so she may not.
			if _, err := carol.ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id})); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("self-approval: %v", err)
			}
			if _, err := viewer.ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id})); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("reader approves: %v", err)
			}
			one, err := alice.ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id, Note: "agreed", Revision: 1}))
			if err != nil {
				t.Fatal(err)
			}
			if a := one.Msg.GetProposal().GetApprovals(); len(a) != 1 || a[0].GetApprover() != "alice" || a[0].GetVia() != "api" || a[0].GetCommit() == "" || one.Msg.GetRule() != nil {
				t.Fatalf("after alice = %v", one.Msg)
			}
			two, err := bob.ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id}))
			if err != nil {
				t.Fatal(err)
			}
			rule := two.Msg.GetRule()
			if two.Msg.GetProposal().GetStatus() != preceptv1.ProposalStatus_PROPOSAL_STATUS_APPROVED || rule.GetStatus() != preceptv1.RuleStatus_RULE_STATUS_ACTIVE || rule.GetRuleType() != preceptv1.RuleType_RULE_TYPE_CONSTRAINT {
				t.Fatalf("after bob = %v", two.Msg)
			}

			active, err := viewer.ListActiveRules(ctx, connect.NewRequest(&preceptv1.ListActiveRulesRequest{Agent: "coding-agent"}))
			if err != nil || len(active.Msg.GetRules()) != 1 {
				t.Fatalf("ListActiveRules = %v, %v", active, err)
			}
			got, err := viewer.GetRule(ctx, connect.NewRequest(&preceptv1.GetRuleRequest{RuleId: rule.GetRuleId()}))
			if err != nil {
				t.Fatal(err)
			}
			g := got.Msg.GetRule()
			if strings.Join(g.GetFeedbackIds(), ",") != "d-1,d-2" || len(g.GetApprovals()) != 2 || len(g.GetCommits()) != 4 || g.GetApprovals()[1].GetCommit() == "" {
				t.Fatalf("GetRule provenance = %v", g)
			}
			if h := got.Msg.GetHistory(); len(h) != 4 || h[0].GetTrailers()["Approved-by"] != "alice, bob" {
				t.Fatalf("GetRule history = %v", h)
			}

			conflicts, err := viewer.CheckConflicts(ctx, connect.NewRequest(&preceptv1.CheckConflictsRequest{Subject: &preceptv1.CheckConflictsRequest_Candidate{
				Candidate: &preceptv1.CandidateRule{Agents: []string{"coding-agent"}, Content: "Always log API tokens for debugging."},
			}}))
			if err != nil || len(conflicts.Msg.GetConflicts()) != 1 || conflicts.Msg.GetConflicts()[0].GetKind() != "opposing" {
				t.Fatalf("CheckConflicts = %v, %v", conflicts, err)
			}

			rolled, err := alice.RollbackRule(ctx, connect.NewRequest(&preceptv1.RollbackRuleRequest{RuleId: rule.GetRuleId(), Reason: "Blocks the audit logger."}))
			if err != nil || rolled.Msg.GetRule().GetStatus() != preceptv1.RuleStatus_RULE_STATUS_ROLLED_BACK || rolled.Msg.GetCommit() == "" {
				t.Fatalf("RollbackRule = %v, %v", rolled, err)
			}
			after, err := viewer.GetRule(ctx, connect.NewRequest(&preceptv1.GetRuleRequest{RuleId: rule.GetRuleId()}))
			if err != nil || after.Msg.GetRule().GetStatus() != preceptv1.RuleStatus_RULE_STATUS_ROLLED_BACK || after.Msg.GetRule().GetRollbackReason() != "Blocks the audit logger." {
				t.Fatalf("GetRule after rollback = %v, %v", after, err)
			}
			if tr := after.Msg.GetHistory()[0].GetTrailers(); tr["Rolled-back-by"] != "alice" {
				t.Fatalf("rollback trailers = %v", tr)
			}
			hist, err := viewer.GetRuleHistory(ctx, connect.NewRequest(&preceptv1.GetRuleHistoryRequest{Id: id}))
			if err != nil || len(hist.Msg.GetCommits()) != 5 {
				t.Fatalf("GetRuleHistory = %v, %v", hist, err)
			}
			if repo == nil {
				t.Fatal("no repository")
			}
		})
	}
}

func TestRuleServiceRejectsListsAndMapsErrors(t *testing.T) {
	ctx := context.Background()
	url, _ := startRuleServer(t)
	alice, bob, viewer := ruleClient(url, "alice", "connect"), ruleClient(url, "bob", "connect"), ruleClient(url, "viewer", "connect")
	var ids []string
	for _, text := range []string{
		"Keep headings in sentence case in every generated document.",
		"Close HTTP response bodies with defer right after checking the error.",
		"Use time.Duration for every timeout setting.",
	} {
		resp, err := alice.ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{AffectedAgents: []string{"docs-agent"}, RuleContent: text}))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Msg.GetProposal().GetProposalId())
	}
	rejected, err := bob.RejectRule(ctx, connect.NewRequest(&preceptv1.RejectRuleRequest{ProposalId: ids[0], Reason: "The style guide says title case."}))
	if err != nil {
		t.Fatal(err)
	}
	if r := rejected.Msg.GetProposal().GetRejection(); r.GetRejector() != "bob" || r.GetCommit() == "" || rejected.Msg.GetProposal().GetStatus() != preceptv1.ProposalStatus_PROPOSAL_STATUS_REJECTED {
		t.Fatalf("rejected = %v", rejected.Msg.GetProposal())
	}

	// Paging through the pending proposals, newest first.
	var seen []string
	token := ""
	for range 3 {
		page, err := viewer.ListProposals(ctx, connect.NewRequest(&preceptv1.ListProposalsRequest{Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING, PageSize: 1, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Msg.GetProposals() {
			seen = append(seen, p.GetProposalId())
		}
		if token = page.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(seen) != 2 || seen[0] == seen[1] {
		t.Fatalf("pages = %v", seen)
	}

	tests := []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"approve rejected", func() error {
			_, err := alice.ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: ids[0]}))
			return err
		}, connect.CodeFailedPrecondition},
		{"stale revision", func() error {
			_, err := bob.ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: ids[1], Revision: 7}))
			return err
		}, connect.CodeFailedPrecondition},
		{"reject without reason", func() error {
			_, err := bob.RejectRule(ctx, connect.NewRequest(&preceptv1.RejectRuleRequest{ProposalId: ids[1]}))
			return err
		}, connect.CodeInvalidArgument},
		{"unknown proposal", func() error {
			_, err := viewer.GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: "p-0000000000"}))
			return err
		}, connect.CodeNotFound},
		{"malformed id", func() error {
			_, err := viewer.GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: "../main"}))
			return err
		}, connect.CodeInvalidArgument},
		{"duplicate proposal", func() error {
			_, err := bob.ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{AffectedAgents: []string{"docs-agent"}, RuleContent: "Use time.Duration for every timeout setting."}))
			return err
		}, connect.CodeAborted},
		{"proposal without agents", func() error {
			_, err := bob.ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{RuleContent: "Use time.Duration for every timeout setting."}))
			return err
		}, connect.CodeInvalidArgument},
		{"reader proposes", func() error {
			_, err := viewer.ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{AffectedAgents: []string{"docs-agent"}, RuleContent: "Use time.Duration for every timeout setting."}))
			return err
		}, connect.CodePermissionDenied},
		{"bad page token", func() error {
			_, err := viewer.ListProposals(ctx, connect.NewRequest(&preceptv1.ListProposalsRequest{PageToken: "!!"}))
			return err
		}, connect.CodeInvalidArgument},
		{"conflicts without subject", func() error {
			_, err := viewer.CheckConflicts(ctx, connect.NewRequest(&preceptv1.CheckConflictsRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"rollback of an unknown rule", func() error {
			_, err := alice.RollbackRule(ctx, connect.NewRequest(&preceptv1.RollbackRuleRequest{RuleId: "r-0000000000", Reason: "x"}))
			return err
		}, connect.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); connect.CodeOf(err) != tt.code {
				t.Fatalf("error = %v, want %s", err, tt.code)
			}
		})
	}
}

// ignoredRules is the rule manager with a fixed list of ignored remote
// changes.
type ignoredRules struct {
	RuleManager
	ignored []rules.IgnoredChange
}

func (r ignoredRules) Ignored() []rules.IgnoredChange { return r.ignored }

// A reader lists the changes the rule manager did not take from the
// remote, every field as the manager reports it, in its order.
func TestListIgnoredRemoteChangesReturnsWhatTheManagerIgnored(t *testing.T) {
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	m, err := rules.New(repo, rules.Options{Approvers: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []rules.IgnoredChange{
		{ProposalID: "p-0123456789", Branch: "proposal/p-0123456789", Commit: strings.Repeat("a", 40), Author: "mallory@example.com",
			Kind: "unknown_branch", Reason: "a proposal branch precept did not make <script>"},
		{ProposalID: "p-abcdefabcd", Branch: "proposal/p-abcdefabcd", Commit: strings.Repeat("b", 40), Author: "eve@example.com",
			Kind: "claim", Reason: "approvals by alice and bob"},
	}
	auth, err := NewAuthenticator([]precept.Credential{credential("viewer", precept.RoleReader, ruleTokens["viewer"])})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(preceptv1connect.NewRuleServiceHandler(&RuleService{Rules: ignoredRules{RuleManager: m, ignored: want}, Log: slog.New(slog.DiscardHandler)},
		connect.WithInterceptors(NewMetricsInterceptor(nil), &AuthInterceptor{Auth: auth})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	resp, err := ruleClient(srv.URL, "viewer", "connect").ListIgnoredRemoteChanges(context.Background(), connect.NewRequest(&preceptv1.ListIgnoredRemoteChangesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Msg.GetChanges()
	if len(got) != len(want) {
		t.Fatalf("got %d changes, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.GetProposalId() != w.ProposalID || g.GetBranch() != w.Branch || g.GetCommit() != w.Commit ||
			g.GetAuthor() != w.Author || g.GetKind() != w.Kind || g.GetReason() != w.Reason {
			t.Errorf("change %d = %v, want %+v", i, g, w)
		}
	}

	// A real manager that fetched nothing lists none.
	url, _ := startRuleServer(t)
	resp, err = ruleClient(url, "viewer", "connect").ListIgnoredRemoteChanges(context.Background(), connect.NewRequest(&preceptv1.ListIgnoredRemoteChangesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Msg.GetChanges()); n != 0 {
		t.Errorf("a manager without a remote lists %d ignored changes", n)
	}
}
