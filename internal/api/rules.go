package api

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/slackapp"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// RuleManager is what RuleService needs of the rule manager.
type RuleManager interface {
	List(ctx context.Context, f rules.ListFilter) ([]rulefmt.Proposal, error)
	Get(ctx context.Context, id string) (rulefmt.Proposal, error)
	Propose(ctx context.Context, p rules.ManualProposal, proposer precept.Identity) (rulefmt.Proposal, error)
	Approve(ctx context.Context, req rules.ApproveRequest) (rulefmt.Proposal, error)
	Reject(ctx context.Context, req rules.RejectRequest) (rulefmt.Proposal, error)
	ActiveRules(ctx context.Context, agent string) ([]rulefmt.Rule, error)
	Rule(ctx context.Context, id string) (rulefmt.Rule, []rulefmt.HistoryEntry, error)
	Rollback(ctx context.Context, req rules.RollbackRequest) (rules.Rollback, error)
	CheckConflicts(ctx context.Context, c rules.Candidate) ([]rulefmt.ConflictReport, error)
	History(ctx context.Context, id string) ([]rulefmt.HistoryEntry, error)
	Ignored() []rules.IgnoredChange
}

var _ RuleManager = (*rules.Manager)(nil)

// RuleService implements preceptv1connect.RuleServiceHandler. Approvals,
// rejections, proposals and rollbacks are made in the name of the
// authenticated caller, never of a name in the request.
type RuleService struct {
	Rules RuleManager
	// Posts says where proposals were posted to Slack; nil leaves that
	// out of the proposals.
	Posts SlackPosts
	// Impact gives each proposal's impact preview; nil leaves it out.
	Impact ImpactPreviews
	// Retired lists the rules that left main, as they were when they
	// left, for ListActiveRules' include_retired; nil lists none.
	Retired func(ctx context.Context, agent string) ([]rulefmt.Rule, error)
	Log     *slog.Logger
}

// SlackPosts says where proposals were posted to Slack; slackapp.Posts
// implements it.
type SlackPosts interface {
	Get(ctx context.Context, id string) (slackapp.Post, bool, error)
}

var _ SlackPosts = (*slackapp.Posts)(nil)

// proposal converts a proposal with its impact preview and where it was
// posted to Slack. The post is shown, not acted on, so a failed read
// leaves it out.
func (s *RuleService) proposal(ctx context.Context, p rulefmt.Proposal) *preceptv1.Proposal {
	out := proposalToProto(p)
	if s.Impact != nil {
		if pv, ok := s.Impact.Preview(p); ok {
			out.Impact = impactToProto(pv)
		}
	}
	if s.Posts == nil {
		return out
	}
	post, ok, err := s.Posts.Get(ctx, p.ID)
	if err != nil {
		s.Log.Warn("read where a proposal was posted to Slack", "proposal_id", p.ID, "err", err)
		return out
	}
	if ok {
		out.Slack = &preceptv1.SlackPost{
			Channel: post.Channel, Ts: post.TS, Permalink: post.Permalink, Posted: post.Posted, Attempts: int32(post.Attempts),
			LastError: post.LastError, UpdatedAt: tsOrNil(post.UpdatedAt), PostedRevision: int32(post.PostedRevision),
		}
	}
	return out
}

var _ preceptv1connect.RuleServiceHandler = (*RuleService)(nil)

func (s *RuleService) fail(ctx context.Context, procedure string, err error) error {
	return toConnect(ctx, s.Log, procedure, err)
}

// ListProposals lists proposals by status and agent, newest first.
func (s *RuleService) ListProposals(ctx context.Context, req *connect.Request[preceptv1.ListProposalsRequest]) (*connect.Response[preceptv1.ListProposalsResponse], error) {
	const proc = preceptv1connect.RuleServiceListProposalsProcedure
	n, err := pageSize(req.Msg.GetPageSize(), 50, 500)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	status, ok := proposalStatuses[req.Msg.GetStatus()]
	if !ok && req.Msg.GetStatus() != preceptv1.ProposalStatus_PROPOSAL_STATUS_UNSPECIFIED {
		return nil, s.fail(ctx, proc, invalid("status", "unknown status %d", req.Msg.GetStatus()))
	}
	list, err := s.Rules.List(ctx, rules.ListFilter{Status: status, Agent: req.Msg.GetAgent()})
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	switch req.Msg.GetOrder() {
	case preceptv1.ProposalOrder_PROPOSAL_ORDER_UNSPECIFIED:
	case preceptv1.ProposalOrder_PROPOSAL_ORDER_EVIDENCE:
		slices.SortStableFunc(list, func(a, b rulefmt.Proposal) int {
			if d := cmp.Compare(len(b.FeedbackIDs), len(a.FeedbackIDs)); d != 0 {
				return d
			}
			if d := a.CreatedAt.Compare(b.CreatedAt); d != 0 {
				return d
			}
			return strings.Compare(a.ID, b.ID)
		})
	default:
		return nil, s.fail(ctx, proc, invalid("order", "unknown order %d", req.Msg.GetOrder()))
	}
	start := 0
	if tok := req.Msg.GetPageToken(); tok != "" {
		after, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return nil, s.fail(ctx, proc, invalid("page_token", "malformed"))
		}
		start = -1
		for i, p := range list {
			if p.ID == string(after) {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, s.fail(ctx, proc, invalid("page_token", "unknown; list again from the start"))
		}
	}
	resp := &preceptv1.ListProposalsResponse{Total: int32(len(list))}
	end := min(start+n, len(list))
	for _, p := range list[start:end] {
		resp.Proposals = append(resp.Proposals, s.proposal(ctx, p))
	}
	if end < len(list) {
		resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(list[end-1].ID))
	}
	return connect.NewResponse(resp), nil
}

// GetProposal returns one proposal with its commits.
func (s *RuleService) GetProposal(ctx context.Context, req *connect.Request[preceptv1.GetProposalRequest]) (*connect.Response[preceptv1.GetProposalResponse], error) {
	const proc = preceptv1connect.RuleServiceGetProposalProcedure
	p, err := s.Rules.Get(ctx, req.Msg.GetProposalId())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.GetProposalResponse{Proposal: s.proposal(ctx, p)}), nil
}

// ProposeRule submits a manual proposal in the caller's name.
func (s *RuleService) ProposeRule(ctx context.Context, req *connect.Request[preceptv1.ProposeRuleRequest]) (*connect.Response[preceptv1.ProposeRuleResponse], error) {
	const proc = preceptv1connect.RuleServiceProposeRuleProcedure
	m := req.Msg
	t := rulefmt.Type("")
	if m.GetRuleType() != preceptv1.RuleType_RULE_TYPE_UNSPECIFIED {
		var ok bool
		if t, ok = ruleTypes[m.GetRuleType()]; !ok {
			return nil, s.fail(ctx, proc, invalid("rule_type", "unknown type %d", m.GetRuleType()))
		}
	}
	p, err := s.Rules.Propose(ctx, rules.ManualProposal{
		Agents: m.GetAffectedAgents(), Type: t, Content: m.GetRuleContent(), InsertionPoint: m.GetInsertionPoint(),
		Rationale: m.GetRationale(), FeedbackIDs: m.GetFeedbackIds(), Tags: m.GetTags(),
	}, caller(ctx))
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.ProposeRuleResponse{Proposal: s.proposal(ctx, p)}), nil
}

// ApproveRule records the caller's approval.
func (s *RuleService) ApproveRule(ctx context.Context, req *connect.Request[preceptv1.ApproveRuleRequest]) (*connect.Response[preceptv1.ApproveRuleResponse], error) {
	const proc = preceptv1connect.RuleServiceApproveRuleProcedure
	p, err := s.Rules.Approve(ctx, rules.ApproveRequest{
		ProposalID: req.Msg.GetProposalId(), By: caller(ctx).Name, Note: req.Msg.GetNote(),
		Revision: int(req.Msg.GetRevision()), Via: via(ctx),
	})
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	resp := &preceptv1.ApproveRuleResponse{Proposal: s.proposal(ctx, p)}
	if p.MergedCommit != "" {
		r, _, err := s.Rules.Rule(ctx, p.RuleID)
		if err != nil && !errors.Is(err, precept.ErrNotFound) {
			return nil, s.fail(ctx, proc, err)
		}
		if err == nil {
			resp.Rule = ruleToProto(r, nil)
		}
	}
	return connect.NewResponse(resp), nil
}

// RejectRule rejects a proposal in the caller's name.
func (s *RuleService) RejectRule(ctx context.Context, req *connect.Request[preceptv1.RejectRuleRequest]) (*connect.Response[preceptv1.RejectRuleResponse], error) {
	const proc = preceptv1connect.RuleServiceRejectRuleProcedure
	p, err := s.Rules.Reject(ctx, rules.RejectRequest{
		ProposalID: req.Msg.GetProposalId(), By: caller(ctx).Name, Reason: req.Msg.GetReason(),
		Revision: int(req.Msg.GetRevision()), Via: via(ctx),
	})
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.RejectRuleResponse{Proposal: s.proposal(ctx, p)}), nil
}

// ListActiveRules lists active rules (and shadow ones when asked).
func (s *RuleService) ListActiveRules(ctx context.Context, req *connect.Request[preceptv1.ListActiveRulesRequest]) (*connect.Response[preceptv1.ListActiveRulesResponse], error) {
	const proc = preceptv1connect.RuleServiceListActiveRulesProcedure
	list, err := s.Rules.ActiveRules(ctx, req.Msg.GetAgent())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	resp := &preceptv1.ListActiveRulesResponse{}
	for _, r := range list {
		if r.Status == rulefmt.Shadow && !req.Msg.GetIncludeShadow() {
			continue
		}
		resp.Rules = append(resp.Rules, ruleToProto(r, nil))
	}
	if req.Msg.GetIncludeRetired() && s.Retired != nil {
		retired, err := s.Retired(ctx, req.Msg.GetAgent())
		if err != nil {
			return nil, s.fail(ctx, proc, err)
		}
		for _, r := range retired {
			resp.Rules = append(resp.Rules, ruleToProto(r, nil))
		}
	}
	return connect.NewResponse(resp), nil
}

// GetRule returns a rule with its provenance and history, also after it
// was rolled back.
func (s *RuleService) GetRule(ctx context.Context, req *connect.Request[preceptv1.GetRuleRequest]) (*connect.Response[preceptv1.GetRuleResponse], error) {
	const proc = preceptv1connect.RuleServiceGetRuleProcedure
	r, hist, err := s.Rules.Rule(ctx, req.Msg.GetRuleId())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.GetRuleResponse{Rule: ruleToProto(r, hist), History: historyToProto(hist)}), nil
}

// RollbackRule reverts an active rule in the caller's name.
func (s *RuleService) RollbackRule(ctx context.Context, req *connect.Request[preceptv1.RollbackRuleRequest]) (*connect.Response[preceptv1.RollbackRuleResponse], error) {
	const proc = preceptv1connect.RuleServiceRollbackRuleProcedure
	rb, err := s.Rules.Rollback(ctx, rules.RollbackRequest{RuleID: req.Msg.GetRuleId(), By: caller(ctx).Name, Reason: req.Msg.GetReason()})
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.RollbackRuleResponse{Rule: ruleToProto(rb.Rule, nil), Commit: rb.Commit}), nil
}

// CheckConflicts reports rules and proposals that duplicate, overlap or
// oppose a proposal or a candidate rule.
func (s *RuleService) CheckConflicts(ctx context.Context, req *connect.Request[preceptv1.CheckConflictsRequest]) (*connect.Response[preceptv1.CheckConflictsResponse], error) {
	const proc = preceptv1connect.RuleServiceCheckConflictsProcedure
	var c rules.Candidate
	switch sub := req.Msg.GetSubject().(type) {
	case *preceptv1.CheckConflictsRequest_ProposalId:
		p, err := s.Rules.Get(ctx, sub.ProposalId)
		if err != nil {
			return nil, s.fail(ctx, proc, err)
		}
		c = rules.Candidate{Agents: p.Agents, Content: p.Content, InsertionPoint: p.InsertionPoint, ProposalID: p.ID}
	case *preceptv1.CheckConflictsRequest_Candidate:
		c = rules.Candidate{Agents: sub.Candidate.GetAgents(), Content: sub.Candidate.GetContent(), InsertionPoint: sub.Candidate.GetInsertionPoint()}
	default:
		return nil, s.fail(ctx, proc, invalid("subject", "set proposal_id or candidate"))
	}
	reports, err := s.Rules.CheckConflicts(ctx, c)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	resp := &preceptv1.CheckConflictsResponse{}
	for _, r := range reports {
		resp.Conflicts = append(resp.Conflicts, conflictToProto(r))
	}
	return connect.NewResponse(resp), nil
}

// GetRuleHistory lists the commits of a rule or a proposal, newest first.
func (s *RuleService) GetRuleHistory(ctx context.Context, req *connect.Request[preceptv1.GetRuleHistoryRequest]) (*connect.Response[preceptv1.GetRuleHistoryResponse], error) {
	const proc = preceptv1connect.RuleServiceGetRuleHistoryProcedure
	hist, err := s.Rules.History(ctx, req.Msg.GetId())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	if len(hist) == 0 {
		return nil, s.fail(ctx, proc, precept.Errorf(precept.NotFound, "no history for %s", req.Msg.GetId()))
	}
	return connect.NewResponse(&preceptv1.GetRuleHistoryResponse{Commits: historyToProto(hist)}), nil
}

// ListIgnoredRemoteChanges lists the changes fetched from the rules
// remote that precept did not take, oldest first.
func (s *RuleService) ListIgnoredRemoteChanges(ctx context.Context, req *connect.Request[preceptv1.ListIgnoredRemoteChangesRequest]) (*connect.Response[preceptv1.ListIgnoredRemoteChangesResponse], error) {
	resp := &preceptv1.ListIgnoredRemoteChangesResponse{}
	for _, c := range s.Rules.Ignored() {
		resp.Changes = append(resp.Changes, &preceptv1.IgnoredRemoteChange{
			ProposalId: c.ProposalID, Branch: c.Branch, Commit: c.Commit, Author: c.Author, Kind: c.Kind, Reason: c.Reason,
		})
	}
	return connect.NewResponse(resp), nil
}

var proposalStatuses = map[preceptv1.ProposalStatus]rulefmt.ProposalStatus{
	preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING:  rulefmt.Pending,
	preceptv1.ProposalStatus_PROPOSAL_STATUS_APPROVED: rulefmt.Approved,
	preceptv1.ProposalStatus_PROPOSAL_STATUS_REJECTED: rulefmt.Rejected,
	preceptv1.ProposalStatus_PROPOSAL_STATUS_BLOCKED:  rulefmt.Blocked,
	preceptv1.ProposalStatus_PROPOSAL_STATUS_DEFERRED: rulefmt.Deferred,
	preceptv1.ProposalStatus_PROPOSAL_STATUS_MERGED:   rulefmt.Merged,
}

var ruleTypes = map[preceptv1.RuleType]rulefmt.Type{
	preceptv1.RuleType_RULE_TYPE_NEGATIVE_EXAMPLE: rulefmt.NegativeExample,
	preceptv1.RuleType_RULE_TYPE_POSITIVE_EXAMPLE: rulefmt.PositiveExample,
	preceptv1.RuleType_RULE_TYPE_GUIDELINE:        rulefmt.Guideline,
	preceptv1.RuleType_RULE_TYPE_CONSTRAINT:       rulefmt.Constraint,
}

var proposalKinds = map[rulefmt.Kind]preceptv1.ProposalKind{
	rulefmt.KindNewRule:       preceptv1.ProposalKind_PROPOSAL_KIND_NEW_RULE,
	rulefmt.KindConsolidation: preceptv1.ProposalKind_PROPOSAL_KIND_CONSOLIDATION,
	rulefmt.KindSunset:        preceptv1.ProposalKind_PROPOSAL_KIND_SUNSET,
	rulefmt.KindReapprove:     preceptv1.ProposalKind_PROPOSAL_KIND_REAPPROVE,
	rulefmt.KindActivate:      preceptv1.ProposalKind_PROPOSAL_KIND_ACTIVATE,
}

var ruleStatuses = map[rulefmt.Status]preceptv1.RuleStatus{
	rulefmt.Shadow:     preceptv1.RuleStatus_RULE_STATUS_SHADOW,
	rulefmt.Active:     preceptv1.RuleStatus_RULE_STATUS_ACTIVE,
	rulefmt.RolledBack: preceptv1.RuleStatus_RULE_STATUS_ROLLED_BACK,
	rulefmt.Sunset:     preceptv1.RuleStatus_RULE_STATUS_SUNSET,
}

var importances = map[rulefmt.Importance]preceptv1.Importance{
	rulefmt.Normal:    preceptv1.Importance_IMPORTANCE_NORMAL,
	rulefmt.Important: preceptv1.Importance_IMPORTANCE_IMPORTANT,
	rulefmt.Critical:  preceptv1.Importance_IMPORTANCE_CRITICAL,
}

func typeToProto(t rulefmt.Type) preceptv1.RuleType {
	for k, v := range ruleTypes {
		if v == t {
			return k
		}
	}
	return preceptv1.RuleType_RULE_TYPE_UNSPECIFIED
}

func statusToProto(s rulefmt.ProposalStatus) preceptv1.ProposalStatus {
	for k, v := range proposalStatuses {
		if v == s {
			return k
		}
	}
	return preceptv1.ProposalStatus_PROPOSAL_STATUS_UNSPECIFIED
}

func tsOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func approvalsToProto(in []rulefmt.Approval) []*preceptv1.Approval {
	out := make([]*preceptv1.Approval, 0, len(in))
	for _, a := range in {
		out = append(out, &preceptv1.Approval{Approver: a.Approver, Note: a.Note, At: tsOrNil(a.At), Via: a.Via, Commit: a.Commit})
	}
	return out
}

func conflictToProto(c rulefmt.ConflictReport) *preceptv1.ConflictReport {
	return &preceptv1.ConflictReport{
		OtherId: c.OtherID, Kind: c.Kind, Similarity: c.Similarity, OtherContent: c.OtherContent,
		Explanation: c.Explanation, Agent: c.Agent, InsertionPoint: c.InsertionPoint,
	}
}

func proposalToProto(p rulefmt.Proposal) *preceptv1.Proposal {
	out := &preceptv1.Proposal{
		ProposalId: p.ID, CreatedFromFeedbackIds: p.FeedbackIDs, ClassificationConfidence: p.Confidence,
		AffectedAgents: p.Agents, RuleType: typeToProto(p.Type), RuleContent: p.Content, InsertionPoint: p.InsertionPoint,
		EvidenceSummary: p.EvidenceSummary, Status: statusToProto(p.Status), CreatedAt: tsOrNil(p.CreatedAt),
		Kind: proposalKinds[p.Kind], ClusterId: p.ClusterID, ProposedBy: p.ProposedBy, Approvals: approvalsToProto(p.Approvals),
		RequiredApprovals: int32(p.Required), Supersedes: p.Supersedes, Revision: int32(p.Revision), Branch: p.Branch,
		Commits: p.Commits, Tags: p.Tags, Protected: p.Protected, RuleId: p.RuleID, Priority: p.Priority, Producers: p.Producers,
		ReviewUrl: p.ReviewURL, UpdatedAt: tsOrNil(p.UpdatedAt),
	}
	if r := p.Rejection; r != nil {
		out.Rejection = &preceptv1.Rejection{Rejector: r.Rejector, Reason: r.Reason, At: tsOrNil(r.At), Via: r.Via, Commit: r.Commit}
	}
	for _, c := range p.Conflicts {
		out.Conflicts = append(out.Conflicts, conflictToProto(c))
	}
	for _, g := range p.Guards {
		out.Guards = append(out.Guards, &preceptv1.GuardResult{Guard: g.Guard, Passed: g.Passed, Reason: g.Reason})
	}
	for _, c := range p.Clauses {
		out.Clauses = append(out.Clauses, &preceptv1.RuleClause{Text: c.Text, Source: c.Source, Category: c.Category,
			DecisionIds: c.Decisions, Words: c.Words, BeyondEvidence: c.Beyond()})
	}
	return out
}

// ruleToProto converts a rule; hist, when given, supplies its commits.
func ruleToProto(r rulefmt.Rule, hist []rulefmt.HistoryEntry) *preceptv1.Rule {
	out := &preceptv1.Rule{
		RuleId: r.ID, Agents: r.Agents, RuleType: typeToProto(r.Type), Content: r.Content, InsertionPoint: r.InsertionPoint,
		Status: ruleStatuses[r.Status], Importance: importances[r.Importance], Confidence: r.Confidence,
		Frequency: int32(r.Frequency), FeedbackIds: r.FeedbackIDs, Approvals: approvalsToProto(r.Approvals),
		ProposalId: r.ProposalID, Commits: rules.Commits(hist), ActivatedAt: tsOrNil(r.ActivatedAt), Tags: r.Tags,
		Protected: r.Protected, ClusterId: r.ClusterID, RollbackReason: r.RollbackReason,
		PositiveValidations: int32(r.PositiveValidations), NegativeValidations: int32(r.NegativeValidations),
		EvidenceSummary: r.EvidenceSummary, ShadowReason: r.ShadowReason, SunsetReason: r.SunsetReason,
	}
	if r.ShadowUntil != nil {
		out.ShadowUntil = timestamppb.New(*r.ShadowUntil)
	}
	if r.ReapprovedAt != nil {
		out.ReapprovedAt = timestamppb.New(*r.ReapprovedAt)
	}
	return out
}

func historyToProto(hist []rulefmt.HistoryEntry) []*preceptv1.RuleCommit {
	out := make([]*preceptv1.RuleCommit, 0, len(hist))
	for _, h := range hist {
		out = append(out, &preceptv1.RuleCommit{Sha: h.Commit, Message: h.Message, Author: h.Author, At: tsOrNil(h.At), Trailers: h.Trailers})
	}
	return out
}
