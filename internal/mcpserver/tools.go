package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// RulesInput names the prompt a tool, resource or prompt is about.
type RulesInput struct {
	Agent string `json:"agent" jsonschema:"the agent the rules are for, e.g. coding-agent"`
	Stage string `json:"stage" jsonschema:"the stage of the agent's work, e.g. implement or review"`
	Path  string `json:"path,omitempty" jsonschema:"repository-relative path of the file or directory being worked on; selects the _rules.md files that apply (empty: the repository root only)"`
}

// RulesOutput is get_rules' answer: BuildPrompt's prompt and version.
type RulesOutput struct {
	Prompt  string   `json:"prompt" jsonschema:"the assembled stage prompt: the base prompt, the _rules.md files on the path and the approved rules"`
	Version string   `json:"version" jsonschema:"the prompt version: pass it to record_decision (it is remembered for this session)"`
	RuleIDs []string `json:"rule_ids" jsonschema:"the learned rules in the prompt, in order"`
	Commit  string   `json:"commit" jsonschema:"the rules-repository commit the prompt was assembled from"`
}

// ExplainInput asks why rules apply.
type ExplainInput struct {
	RulesInput
	RuleID string `json:"rule_id,omitempty" jsonschema:"explain only this rule (empty: every rule and _rules.md file considered)"`
}

// DecisionInput is a human decision at a HITL gate, as record_decision
// takes it.
type DecisionInput struct {
	DecisionID      string   `json:"decision_id" jsonschema:"unique id of the decision; recording the same id twice stores it once"`
	Agent           string   `json:"agent" jsonschema:"the agent whose output was reviewed"`
	Stage           string   `json:"stage,omitempty" jsonschema:"the stage the output was produced in; picks the remembered prompt version when prompt_version is empty"`
	GateID          string   `json:"gate_id" jsonschema:"the HITL gate, e.g. HITL-2"`
	EpicID          string   `json:"epic_id" jsonschema:"the epic (or project) the work belongs to"`
	TaskID          string   `json:"task_id,omitempty" jsonschema:"the task within the epic"`
	Verdict         string   `json:"verdict" jsonschema:"the reviewer's verdict: APPROVED, REJECTED or APPROVED_WITH_CHANGES"`
	ReviewerID      string   `json:"reviewer_id" jsonschema:"who reviewed"`
	Timestamp       string   `json:"timestamp,omitempty" jsonschema:"when the decision was made, RFC 3339 (empty: now)"`
	ReviewerComment string   `json:"reviewer_comment,omitempty" jsonschema:"the reviewer's comment"`
	AgentOutput     string   `json:"agent_output,omitempty" jsonschema:"what the agent produced"`
	ApprovedOutput  string   `json:"approved_output,omitempty" jsonschema:"what the reviewer approved, after corrections"`
	CorrectionDiff  string   `json:"correction_diff,omitempty" jsonschema:"a unified diff of the reviewer's correction"`
	ScopePath       string   `json:"scope_path,omitempty" jsonschema:"repository path of the reviewed artifact; pass the path given to get_rules, so the version served for it is recorded"`
	Tags            []string `json:"tags,omitempty" jsonschema:"labels for the decision"`
	Rating          string   `json:"rating,omitempty" jsonschema:"positive, negative or skipped"`
	ErrorCategories []string `json:"error_categories,omitempty" jsonschema:"the kinds of error the reviewer flagged"`
	PromptVersion   string   `json:"prompt_version,omitempty" jsonschema:"the prompt version the reviewed output was produced with; empty: the version this session last received from get_rules, the rules resource or prompt for this agent, stage and exactly scope_path, else the only version it received for the agent and stage (for the agent, without a stage), else none"`
}

// DecisionOutput says what record_decision stored.
type DecisionOutput struct {
	DecisionID    string `json:"decision_id"`
	Created       bool   `json:"created" jsonschema:"false when the decision id was already stored (the stored record is unchanged)"`
	PromptVersion string `json:"prompt_version" jsonschema:"the prompt version recorded with the decision (empty: none)"`
	VersionSource string `json:"prompt_version_source" jsonschema:"where it came from: given, session (the version this session last received) or none"`
}

// ListProposalsInput filters list_proposals.
type ListProposalsInput struct {
	Status    string `json:"status,omitempty" jsonschema:"PENDING (the default), APPROVED, REJECTED, BLOCKED, DEFERRED, MERGED or ALL"`
	Agent     string `json:"agent,omitempty" jsonschema:"only proposals affecting this agent"`
	PageSize  int32  `json:"page_size,omitempty" jsonschema:"how many to return"`
	PageToken string `json:"page_token,omitempty" jsonschema:"next_page_token of the previous page"`
}

// ProposalInput names a proposal.
type ProposalInput struct {
	ProposalID string `json:"proposal_id" jsonschema:"the proposal's id"`
}

// ApproveInput is an approval.
type ApproveInput struct {
	ProposalID string `json:"proposal_id" jsonschema:"the proposal to approve"`
	Revision   int32  `json:"revision,omitempty" jsonschema:"the revision you reviewed (get_proposal's revision): the approval is refused if the proposal changed since"`
	Note       string `json:"note,omitempty" jsonschema:"a note kept with the approval"`
}

// RejectInput is a rejection.
type RejectInput struct {
	ProposalID string `json:"proposal_id" jsonschema:"the proposal to reject"`
	Reason     string `json:"reason" jsonschema:"why it is rejected (required)"`
	Revision   int32  `json:"revision,omitempty" jsonschema:"the revision you reviewed: the rejection is refused if the proposal changed since"`
}

func (s *Server) addTools() {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "get_rules", Title: "Get the rules",
		Description: "The assembled stage prompt for an agent, stage and path: the approved rules to follow, with the prompt version (the same as precept's BuildPrompt). The session remembers the version for record_decision. Needs the reader role.",
		Annotations: readOnly}, s.getRules)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "explain_rules", Title: "Explain the rules",
		Description: "Why each rule and _rules.md file does or does not apply to an agent, stage and path (precept's ExplainPrompt), optionally for one rule. Needs the reader role.",
		Annotations: readOnly}, s.explainRules)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "record_decision", Title: "Record a review decision",
		Description: "Records one human decision at a HITL gate, as if it had arrived on precept's stream. Without prompt_version it records the version this session last received from get_rules (or the rules resource or prompt) for the agent, stage and scope_path (the path given there), else the only version it received for the agent and stage; the answer says which version was recorded. Needs the recorder role."},
		s.recordDecision)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list_proposals", Title: "List rule proposals",
		Description: "Rule proposals waiting for approval (or of another status), newest first. Needs the reader role.",
		Annotations: readOnly}, s.listProposals)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "get_proposal", Title: "Show a rule proposal",
		Description: "One rule proposal: its text, evidence, guards, approvals and revision. Needs the reader role.",
		Annotations: readOnly}, s.getProposal)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "approve_proposal", Title: "Approve a rule proposal",
		Description: "Records your approval of a rule proposal, under precept's policy: approvers must be distinct, a proposer cannot approve their own proposal, and a revision given must still be current. The rule is merged once enough approvers agree. Needs the approver role."},
		s.approveProposal)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "reject_proposal", Title: "Reject a rule proposal",
		Description: "Rejects a rule proposal with a reason, under the same policy as approvals. Needs the approver role."},
		s.rejectProposal)
}

func (s *Server) getRules(ctx context.Context, req *mcp.CallToolRequest, in RulesInput) (*mcp.CallToolResult, RulesOutput, error) {
	p, err := s.build(ctx, req.Session, req.Extra, in)
	if err != nil {
		return nil, RulesOutput{}, err
	}
	out := RulesOutput{Prompt: p.GetPrompt(), Version: p.GetVersion(), RuleIDs: p.GetRuleIds(), Commit: p.GetCommit()}
	if out.RuleIDs == nil {
		out.RuleIDs = []string{}
	}
	text := fmt.Sprintf("prompt version %s (%d learned rules)\n\n%s", out.Version, len(out.RuleIDs), out.Prompt)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// build calls BuildPrompt as the caller and remembers the version served.
func (s *Server) build(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, in RulesInput) (*preceptv1.BuildPromptResponse, error) {
	ctx, err := s.caller(ctx, extra)
	if err != nil {
		return nil, err
	}
	resp, err := s.clients.Prompts.BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: in.Agent, Stage: in.Stage, ScopePath: in.Path}))
	if err != nil {
		return nil, clientError(err)
	}
	s.served(ss, in, resp.Msg.GetVersion())
	return resp.Msg, nil
}

func (s *Server) explainRules(ctx context.Context, req *mcp.CallToolRequest, in ExplainInput) (*mcp.CallToolResult, map[string]any, error) {
	ctx, err := s.caller(ctx, req.Extra)
	if err != nil {
		return nil, nil, err
	}
	resp, err := s.clients.Prompts.ExplainPrompt(ctx, connect.NewRequest(&preceptv1.ExplainPromptRequest{Agent: in.Agent, Stage: in.Stage, ScopePath: in.Path}))
	if err != nil {
		return nil, nil, clientError(err)
	}
	e := resp.Msg
	if in.RuleID != "" {
		var only []*preceptv1.RuleExplanation
		for _, r := range e.GetRules() {
			if r.GetRuleId() == in.RuleID {
				only = append(only, r)
			}
		}
		if only == nil {
			return nil, nil, fmt.Errorf("not_found: rule %q is not among the rules considered for agent %q, stage %q", in.RuleID, in.Agent, in.Stage)
		}
		e = &preceptv1.ExplainPromptResponse{Version: e.GetVersion(), BasePromptRef: e.GetBasePromptRef(), Rules: only, Summary: e.GetSummary()}
	}
	return structured(e)
}

func (s *Server) recordDecision(ctx context.Context, req *mcp.CallToolRequest, in DecisionInput) (*mcp.CallToolResult, DecisionOutput, error) {
	ctx, err := s.caller(ctx, req.Extra)
	if err != nil {
		return nil, DecisionOutput{}, err
	}
	verdict, ok := preceptv1.Verdict_value["VERDICT_"+strings.ToUpper(strings.TrimSpace(in.Verdict))]
	if !ok || verdict == 0 {
		return nil, DecisionOutput{}, fmt.Errorf("invalid_argument: verdict must be APPROVED, REJECTED or APPROVED_WITH_CHANGES, got %q", in.Verdict)
	}
	when := time.Now()
	if in.Timestamp != "" {
		if when, err = time.Parse(time.RFC3339Nano, in.Timestamp); err != nil {
			return nil, DecisionOutput{}, fmt.Errorf("invalid_argument: timestamp must be RFC 3339, e.g. 2026-11-27T10:00:00Z")
		}
	}
	version, source := in.PromptVersion, "given"
	if version == "" {
		version, source = s.lastServed(req.Session, in.Agent, in.Stage, in.ScopePath), "session"
	}
	if version == "" {
		source = "none"
	}
	d := &preceptv1.HITLDecision{
		DecisionId: in.DecisionID, GateId: in.GateID, EpicId: in.EpicID, TaskId: in.TaskID, Agent: in.Agent,
		Decision: preceptv1.Verdict(verdict), ReviewerId: in.ReviewerID, Timestamp: timestamppb.New(when),
		ReviewerComment: in.ReviewerComment, AgentOutput: in.AgentOutput, ApprovedOutput: in.ApprovedOutput,
		CorrectionDiff: in.CorrectionDiff, ScopePath: in.ScopePath, Tags: in.Tags, Rating: in.Rating,
		ErrorCategories: in.ErrorCategories, PromptVersion: version,
	}
	resp, err := s.clients.Feedback.RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: d}))
	if err != nil {
		return nil, DecisionOutput{}, clientError(err)
	}
	out := DecisionOutput{DecisionID: resp.Msg.GetDecisionId(), Created: resp.Msg.GetCreated(), PromptVersion: version, VersionSource: source}
	if stored := resp.Msg.GetFeedback().GetDecision(); stored != nil {
		// A decision stored before keeps the version it was stored with.
		if stored.GetPromptVersion() != version {
			out.PromptVersion, out.VersionSource = stored.GetPromptVersion(), "stored"
		}
	}
	return nil, out, nil
}

// proposalStatuses maps list_proposals' status names to the API's.
var proposalStatuses = map[string]preceptv1.ProposalStatus{
	"":         preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING,
	"ALL":      preceptv1.ProposalStatus_PROPOSAL_STATUS_UNSPECIFIED,
	"PENDING":  preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING,
	"APPROVED": preceptv1.ProposalStatus_PROPOSAL_STATUS_APPROVED,
	"REJECTED": preceptv1.ProposalStatus_PROPOSAL_STATUS_REJECTED,
	"BLOCKED":  preceptv1.ProposalStatus_PROPOSAL_STATUS_BLOCKED,
	"DEFERRED": preceptv1.ProposalStatus_PROPOSAL_STATUS_DEFERRED,
	"MERGED":   preceptv1.ProposalStatus_PROPOSAL_STATUS_MERGED,
}

func (s *Server) listProposals(ctx context.Context, req *mcp.CallToolRequest, in ListProposalsInput) (*mcp.CallToolResult, map[string]any, error) {
	ctx, err := s.caller(ctx, req.Extra)
	if err != nil {
		return nil, nil, err
	}
	status, ok := proposalStatuses[strings.ToUpper(strings.TrimSpace(in.Status))]
	if !ok {
		return nil, nil, fmt.Errorf("invalid_argument: status must be PENDING, APPROVED, REJECTED, BLOCKED, DEFERRED, MERGED or ALL, got %q", in.Status)
	}
	resp, err := s.clients.Rules.ListProposals(ctx, connect.NewRequest(&preceptv1.ListProposalsRequest{Status: status, Agent: in.Agent, PageSize: in.PageSize, PageToken: in.PageToken}))
	if err != nil {
		return nil, nil, clientError(err)
	}
	return structured(resp.Msg)
}

func (s *Server) getProposal(ctx context.Context, req *mcp.CallToolRequest, in ProposalInput) (*mcp.CallToolResult, map[string]any, error) {
	return callTool(ctx, s, req.Extra, s.clients.Rules.GetProposal, &preceptv1.GetProposalRequest{ProposalId: in.ProposalID})
}

func (s *Server) approveProposal(ctx context.Context, req *mcp.CallToolRequest, in ApproveInput) (*mcp.CallToolResult, map[string]any, error) {
	return callTool(ctx, s, req.Extra, s.clients.Rules.ApproveRule, &preceptv1.ApproveRuleRequest{ProposalId: in.ProposalID, Revision: in.Revision, Note: in.Note})
}

func (s *Server) rejectProposal(ctx context.Context, req *mcp.CallToolRequest, in RejectInput) (*mcp.CallToolResult, map[string]any, error) {
	return callTool(ctx, s, req.Extra, s.clients.Rules.RejectRule, &preceptv1.RejectRuleRequest{ProposalId: in.ProposalID, Reason: in.Reason, Revision: in.Revision})
}

// callTool calls one RPC as the tool's caller and renders its answer as
// the tool's structured result; a refusal is the API's client-safe
// error.
func callTool[Req, Resp any](ctx context.Context, s *Server, extra *mcp.RequestExtra, rpc func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), msg *Req) (*mcp.CallToolResult, map[string]any, error) {
	ctx, err := s.caller(ctx, extra)
	if err != nil {
		return nil, nil, err
	}
	resp, err := rpc(ctx, connect.NewRequest(msg))
	if err != nil {
		return nil, nil, clientError(err)
	}
	m, ok := any(resp.Msg).(proto.Message)
	if !ok {
		return nil, nil, fmt.Errorf("internal: %T is not a protobuf message", resp.Msg)
	}
	return structured(m)
}

// structured renders an API answer as a tool's structured result, in the
// API's JSON form (field names as in the .proto files).
func structured(m proto.Message) (*mcp.CallToolResult, map[string]any, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("internal: encode the answer: %w", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, nil, fmt.Errorf("internal: encode the answer: %w", err)
	}
	return nil, out, nil
}
