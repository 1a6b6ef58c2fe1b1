package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

func (c *cli) rulesClient() preceptv1connect.RuleServiceClient {
	return preceptv1connect.NewRuleServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
}

// proposalStatusNames are the --status values.
var proposalStatusNames = map[string]preceptv1.ProposalStatus{
	"pending":  preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING,
	"approved": preceptv1.ProposalStatus_PROPOSAL_STATUS_APPROVED,
	"rejected": preceptv1.ProposalStatus_PROPOSAL_STATUS_REJECTED,
	"blocked":  preceptv1.ProposalStatus_PROPOSAL_STATUS_BLOCKED,
	"deferred": preceptv1.ProposalStatus_PROPOSAL_STATUS_DEFERRED,
	"merged":   preceptv1.ProposalStatus_PROPOSAL_STATUS_MERGED,
}

// ruleTypeNames are the --type values.
var ruleTypeNames = map[string]preceptv1.RuleType{
	"negative-example": preceptv1.RuleType_RULE_TYPE_NEGATIVE_EXAMPLE,
	"positive-example": preceptv1.RuleType_RULE_TYPE_POSITIVE_EXAMPLE,
	"guideline":        preceptv1.RuleType_RULE_TYPE_GUIDELINE,
	"constraint":       preceptv1.RuleType_RULE_TYPE_CONSTRAINT,
}

func sortedNames[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func (c *cli) proposalsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "proposals", Short: "Review rule proposals: list, show, approve, reject, propose"}
	cmd.AddCommand(c.proposalsListCmd(), c.proposalsShowCmd(), c.proposalsApproveCmd(), c.proposalsRejectCmd(), c.proposalsProposeCmd())
	return cmd
}

func (c *cli) proposalsListCmd() *cobra.Command {
	var status, agent, token string
	var limit int32
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "list [--status pending|approved|rejected|blocked|deferred|merged] [--agent NAME] [--wait DURATION]",
		Short: "List proposals, newest first; blocked and deferred drafts show why",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &preceptv1.ListProposalsRequest{Agent: agent, PageSize: limit, PageToken: token}
			if status != "" {
				s, ok := proposalStatusNames[strings.ToLower(status)]
				if !ok {
					return usagef("--status must be one of %s, got %q", sortedNames(proposalStatusNames), status)
				}
				req.Status = s
			}
			var resp *connect.Response[preceptv1.ListProposalsResponse]
			err := poll(cmd, c.timeout, wait, func(ctx context.Context) (done bool, err error) {
				resp, err = c.rulesClient().ListProposals(ctx, connect.NewRequest(req))
				return err == nil && len(resp.Msg.GetProposals()) > 0, err
			})
			if err != nil {
				return err
			}
			return c.emit(resp.Msg, func(w io.Writer) {
				var rows [][]string
				for _, p := range resp.Msg.GetProposals() {
					rows = append(rows, []string{p.GetProposalId(), proposalStatus(p.GetStatus()), strings.Join(p.GetAffectedAgents(), ","),
						fmt.Sprintf("%d/%d", len(p.GetApprovals()), p.GetRequiredApprovals()), ts(p.GetCreatedAt()), proposalNote(p)})
				}
				table(w, []string{"PROPOSAL", "STATUS", "AGENTS", "APPROVALS", "CREATED", "RULE / REASON"}, rows)
				if resp.Msg.GetNextPageToken() != "" {
					fmt.Fprintf(w, "\nmore: --page-token %s\n", resp.Msg.GetNextPageToken())
				}
			})
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only this status")
	cmd.Flags().StringVar(&agent, "agent", "", "only proposals for this agent")
	cmd.Flags().Int32Var(&limit, "limit", 50, "proposals per page (max 500)")
	cmd.Flags().StringVar(&token, "page-token", "", "continue a previous listing")
	addWait(cmd, &wait, "for at least one proposal")
	return cmd
}

// evidenceGuard is the guard that shows what goes beyond the evidence
// and never holds a proposal (docs/lessons.md, "Rules no wider than the
// evidence").
const evidenceGuard = "evidence"

// proposalNote is the list's last column: why a held draft was held
// (the first failed guard but the evidence guard, which only informs),
// else the rule text.
func proposalNote(p *preceptv1.Proposal) string {
	switch p.GetStatus() {
	case preceptv1.ProposalStatus_PROPOSAL_STATUS_BLOCKED, preceptv1.ProposalStatus_PROPOSAL_STATUS_DEFERRED:
		for _, g := range p.GetGuards() {
			// The evidence guard never holds a draft (FailedGuard
			// skips it too): the note names the guard that did.
			if !g.GetPassed() && g.GetGuard() != evidenceGuard {
				return clip(g.GetGuard()+": "+g.GetReason(), 80)
			}
		}
	case preceptv1.ProposalStatus_PROPOSAL_STATUS_REJECTED:
		if r := p.GetRejection(); r != nil {
			return clip("rejected by "+r.GetRejector()+": "+r.GetReason(), 80)
		}
	}
	return clip(p.GetRuleContent(), 80)
}

func proposalStatus(s preceptv1.ProposalStatus) string {
	return strings.TrimPrefix(s.String(), "PROPOSAL_STATUS_")
}

func (c *cli) proposalsShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show PROPOSAL_ID",
		Short: "Show a proposal: rule text, evidence, guards, conflicts, approvals and commits",
		Args:  exactArgs(1, "show needs one PROPOSAL_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.rulesClient().GetProposal, &preceptv1.GetProposalRequest{ProposalId: args[0]})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) { printProposal(w, msg.GetProposal()) })
		},
	}
}

// slackState says whether and where a proposal was posted to Slack, and
// why not when posting failed.
func slackState(s *preceptv1.SlackPost) string {
	switch {
	case s == nil || (s.GetAttempts() == 0 && !s.GetPosted()):
		return ""
	case s.GetPosted():
		where := s.GetPermalink()
		if where == "" {
			where = s.GetChannel() + " " + s.GetTs()
		}
		out := fmt.Sprintf("posted at %s (revision %d shown)", where, s.GetPostedRevision())
		if s.GetLastError() != "" {
			out += fmt.Sprintf("; last update failed after %d attempts: %s", s.GetAttempts(), s.GetLastError())
		}
		return out
	}
	return fmt.Sprintf("not posted yet: %d attempts, last error: %s", s.GetAttempts(), s.GetLastError())
}

func printProposal(w io.Writer, p *preceptv1.Proposal) {
	rej := ""
	if r := p.GetRejection(); r != nil {
		rej = fmt.Sprintf("by %s via %s at %s: %s", r.GetRejector(), r.GetVia(), ts(r.GetAt()), r.GetReason())
	}
	protected := ""
	if p.GetProtected() {
		protected = "yes (needs an extra approval)"
	}
	fields(w,
		"proposal", p.GetProposalId(),
		"status", fmt.Sprintf("%s (revision %d)", proposalStatus(p.GetStatus()), p.GetRevision()),
		"kind", strings.TrimPrefix(p.GetKind().String(), "PROPOSAL_KIND_"),
		"agents", strings.Join(p.GetAffectedAgents(), ", "),
		"type", strings.TrimPrefix(p.GetRuleType().String(), "RULE_TYPE_"),
		"insertion", p.GetInsertionPoint(),
		"proposed", fmt.Sprintf("by %s at %s", p.GetProposedBy(), ts(p.GetCreatedAt())),
		"cluster", p.GetClusterId(),
		"priority", p.GetPriority(),
		"tags", strings.Join(p.GetTags(), ", "),
		"producers", strings.Join(p.GetProducers(), ", "),
		"protected", protected,
		"approvals", fmt.Sprintf("%d of %d", len(p.GetApprovals()), p.GetRequiredApprovals()),
		"rejected", rej,
		"rule", p.GetRuleId(),
		"supersedes", strings.Join(p.GetSupersedes(), ", "),
		"branch", p.GetBranch(),
		"review", p.GetReviewUrl(),
		"slack", slackState(p.GetSlack()),
	)
	fmt.Fprintf(w, "\n%s\n", indent(p.GetRuleContent()))
	fmt.Fprintf(w, "\nEvidence\n%s\n", indent(p.GetEvidenceSummary()))
	if len(p.GetApprovals()) > 0 {
		fmt.Fprintln(w, "\nApprovals")
		for _, a := range p.GetApprovals() {
			note := ""
			if a.GetNote() != "" {
				note = ": " + line(a.GetNote())
			}
			fmt.Fprintf(w, "  %s via %s at %s%s\n", a.GetApprover(), a.GetVia(), ts(a.GetAt()), note)
		}
	}
	if len(p.GetGuards()) > 0 {
		fmt.Fprintln(w, "\nGuards")
		for _, g := range p.GetGuards() {
			mark := "pass"
			switch {
			case !g.GetPassed() && g.GetGuard() == evidenceGuard:
				// It never holds a proposal: it shows what goes beyond
				// the evidence.
				mark = "WARN"
			case !g.GetPassed():
				mark = "HOLD"
			}
			fmt.Fprintf(w, "  %-4s %s%s\n", mark, g.GetGuard(), prefixed(": ", line(g.GetReason())))
		}
	}
	printConflicts(w, p.GetConflicts())
	printImpact(w, p.GetImpact())
	if len(p.GetCommits()) > 0 {
		fmt.Fprintln(w, "\nCommits")
		for _, sha := range p.GetCommits() {
			fmt.Fprintf(w, "  %s\n", sha)
		}
	}
}

func printConflicts(w io.Writer, conflicts []*preceptv1.ConflictReport) {
	if len(conflicts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nConflicts")
	for _, c := range conflicts {
		fmt.Fprintf(w, "  %s %s (%.2f): %s\n    %s\n", c.GetKind(), c.GetOtherId(), c.GetSimilarity(), line(c.GetExplanation()), line(clip(c.GetOtherContent(), 100)))
	}
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

func (c *cli) proposalsApproveCmd() *cobra.Command {
	var note string
	var revision int32
	cmd := &cobra.Command{
		Use:   "approve PROPOSAL_ID [--note TEXT] [--revision N]",
		Short: "Approve a proposal as the identity of your token",
		Args:  exactArgs(1, "approve needs one PROPOSAL_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.rulesClient().ApproveRule, &preceptv1.ApproveRuleRequest{ProposalId: args[0], Note: note, Revision: revision})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				p := msg.GetProposal()
				fmt.Fprintf(w, "%s: %d of %d approvals, %s\n", p.GetProposalId(), len(p.GetApprovals()), p.GetRequiredApprovals(), proposalStatus(p.GetStatus()))
				if r := msg.GetRule(); r != nil {
					fmt.Fprintf(w, "rule %s is %s on main\n", r.GetRuleId(), ruleStatus(r.GetStatus()))
				} else if p.GetStatus() == preceptv1.ProposalStatus_PROPOSAL_STATUS_APPROVED {
					fmt.Fprintf(w, "waiting to be merged (auto-merge is off): merge %s in git\n", p.GetBranch())
				}
			})
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "why you approve (kept as a tuning example)")
	cmd.Flags().Int32Var(&revision, "revision", 0, "refuse if the proposal changed since this revision")
	return cmd
}

func (c *cli) proposalsRejectCmd() *cobra.Command {
	var reason string
	var revision int32
	cmd := &cobra.Command{
		Use:   "reject PROPOSAL_ID --reason TEXT [--revision N]",
		Short: "Reject a proposal as the identity of your token",
		Args:  exactArgs(1, "reject needs one PROPOSAL_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usagef("reject needs --reason TEXT")
			}
			msg, err := call(c, cmd, c.rulesClient().RejectRule, &preceptv1.RejectRuleRequest{ProposalId: args[0], Reason: reason, Revision: revision})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				p := msg.GetProposal()
				fmt.Fprintf(w, "%s rejected by %s\n", p.GetProposalId(), p.GetRejection().GetRejector())
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; kept as a tuning example)")
	cmd.Flags().Int32Var(&revision, "revision", 0, "refuse if the proposal changed since this revision")
	return cmd
}

func (c *cli) proposalsProposeCmd() *cobra.Command {
	var agents, feedback, tags []string
	var text, typ, insertion, rationale string
	cmd := &cobra.Command{
		Use:   "propose --agent NAME --text RULE [--type guideline] [--rationale WHY]",
		Short: "Propose a rule yourself (you cannot approve it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(agents) == 0 || strings.TrimSpace(text) == "" {
				return usagef("propose needs --agent NAME and --text RULE")
			}
			t, ok := ruleTypeNames[strings.ToLower(typ)]
			if !ok {
				return usagef("--type must be one of %s, got %q", sortedNames(ruleTypeNames), typ)
			}
			msg, err := call(c, cmd, c.rulesClient().ProposeRule, &preceptv1.ProposeRuleRequest{
				AffectedAgents: agents, RuleType: t, RuleContent: text, InsertionPoint: insertion,
				Rationale: rationale, FeedbackIds: feedback, Tags: tags,
			})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				p := msg.GetProposal()
				fmt.Fprintf(w, "proposed %s on branch %s; it needs %d approvals\n", p.GetProposalId(), p.GetBranch(), p.GetRequiredApprovals())
				printConflicts(w, p.GetConflicts())
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&agents, "agent", nil, "agent the rule is for (repeatable)")
	f.StringVar(&text, "text", "", "the rule text")
	f.StringVar(&typ, "type", "guideline", "rule type: "+sortedNames(ruleTypeNames))
	f.StringVar(&insertion, "insertion-point", "", "where in the prompt (default learned_rules)")
	f.StringVar(&rationale, "rationale", "", "why the rule is needed")
	f.StringSliceVar(&feedback, "feedback-id", nil, "decision that supports it (repeatable)")
	f.StringSliceVar(&tags, "tag", nil, "tag (repeatable)")
	return cmd
}

func ruleStatus(s preceptv1.RuleStatus) string {
	return strings.TrimPrefix(s.String(), "RULE_STATUS_")
}

func (c *cli) rulesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "rules", Short: "Inspect and roll back approved rules"}
	cmd.AddCommand(c.rulesListCmd(), c.rulesShowCmd(), c.rulesRollbackCmd(), c.rulesHistoryCmd(), c.rulesCheckCmd(), rulesEffectCmd(c))
	return cmd
}

func (c *cli) rulesListCmd() *cobra.Command {
	var agent string
	var shadow bool
	cmd := &cobra.Command{
		Use:   "list [--agent NAME] [--shadow]",
		Short: "List active rules (and shadow ones with --shadow)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.rulesClient().ListActiveRules, &preceptv1.ListActiveRulesRequest{Agent: agent, IncludeShadow: shadow})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				var rows [][]string
				for _, r := range msg.GetRules() {
					rows = append(rows, []string{r.GetRuleId(), ruleStatus(r.GetStatus()), strings.Join(r.GetAgents(), ","),
						strings.TrimPrefix(r.GetImportance().String(), "IMPORTANCE_"), fmt.Sprintf("%.2f", r.GetConfidence()), fmt.Sprint(r.GetFrequency()), clip(r.GetContent(), 70)})
				}
				table(w, []string{"RULE", "STATUS", "AGENTS", "IMPORTANCE", "CONFIDENCE", "FREQ", "TEXT"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's rules")
	cmd.Flags().BoolVar(&shadow, "shadow", false, "include rules in their shadow period")
	return cmd
}

func (c *cli) rulesShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show RULE_ID",
		Short: "Show a rule with its provenance: feedback, approvers, commits",
		Args:  exactArgs(1, "show needs one RULE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := c.ctx(cmd)
			defer cancel()
			resp, err := c.rulesClient().GetRule(ctx, connect.NewRequest(&preceptv1.GetRuleRequest{RuleId: args[0]}))
			if err != nil {
				return err
			}
			// The effect is shown when the server measures it; a server
			// with the learning loop off (or older) still shows the rule.
			var eff *preceptv1.RuleEffect
			if er, err := effectClient(c).GetRuleEffect(ctx, connect.NewRequest(&preceptv1.GetRuleEffectRequest{RuleId: args[0]})); err == nil {
				eff = er.Msg.GetEffect()
			}
			return c.emit(resp.Msg, func(w io.Writer) {
				r := resp.Msg.GetRule()
				var approvers []string
				for _, a := range r.GetApprovals() {
					approvers = append(approvers, fmt.Sprintf("%s (%s, %s)", a.GetApprover(), a.GetVia(), short(a.GetCommit())))
				}
				shadow := ""
				if r.GetShadowUntil() != nil {
					shadow = ts(r.GetShadowUntil())
				}
				fields(w,
					"rule", r.GetRuleId(),
					"status", ruleStatus(r.GetStatus()),
					"rolled back", r.GetRollbackReason(),
					"sunset", r.GetSunsetReason(),
					"shadow reason", r.GetShadowReason(),
					"re-approved", ts(r.GetReapprovedAt()),
					"agents", strings.Join(r.GetAgents(), ", "),
					"type", strings.TrimPrefix(r.GetRuleType().String(), "RULE_TYPE_"),
					"importance", strings.TrimPrefix(r.GetImportance().String(), "IMPORTANCE_"),
					"confidence", fmt.Sprintf("%.2f", r.GetConfidence()),
					"frequency", fmt.Sprint(r.GetFrequency()),
					"proposal", r.GetProposalId(),
					"cluster", r.GetClusterId(),
					"activated", ts(r.GetActivatedAt()),
					"shadow until", shadow,
					"approvers", strings.Join(approvers, ", "),
					"feedback", strings.Join(r.GetFeedbackIds(), ", "),
				)
				fmt.Fprintf(w, "\n%s\n", indent(r.GetContent()))
				if r.GetEvidenceSummary() != "" {
					fmt.Fprintf(w, "\nEvidence\n%s\n", indent(r.GetEvidenceSummary()))
				}
				if eff != nil {
					fmt.Fprintln(w, "\nEffect")
					printEffect(w, eff)
				}
				printHistory(w, resp.Msg.GetHistory())
			})
		},
	}
}

func printHistory(w io.Writer, hist []*preceptv1.RuleCommit) {
	if len(hist) == 0 {
		return
	}
	fmt.Fprintln(w, "\nHistory")
	for _, h := range hist {
		subject, _, _ := strings.Cut(h.GetMessage(), "\n")
		fmt.Fprintf(w, "  %s  %s  %s\n", short(h.GetSha()), ts(h.GetAt()), line(subject))
		keys := make([]string, 0, len(h.GetTrailers()))
		for k := range h.GetTrailers() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "      %s: %s\n", line(k), line(clip(h.GetTrailers()[k], 100)))
		}
	}
}

func (c *cli) rulesRollbackCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "rollback RULE_ID --reason TEXT",
		Short: "Revert an active rule with a commit that records you and the reason",
		Args:  exactArgs(1, "rollback needs one RULE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usagef("rollback needs --reason TEXT")
			}
			msg, err := call(c, cmd, c.rulesClient().RollbackRule, &preceptv1.RollbackRuleRequest{RuleId: args[0], Reason: reason})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				fmt.Fprintf(w, "rolled back %s in commit %s\n", msg.GetRule().GetRuleId(), short(msg.GetCommit()))
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	return cmd
}

func (c *cli) rulesHistoryCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "history ID",
		Short: "Show the commits of a rule or a proposal, newest first, with their trailers",
		Args:  exactArgs(1, "history needs one rule or proposal ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.rulesClient().GetRuleHistory, &preceptv1.GetRuleHistoryRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) { printHistory(w, msg.GetCommits()) })
		},
	}
}

func (c *cli) rulesCheckCmd() *cobra.Command {
	var agents []string
	var text, insertion string
	cmd := &cobra.Command{
		Use:   "check --agent NAME --text RULE",
		Short: "Report active rules and open proposals a rule text would duplicate, overlap or oppose",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(agents) == 0 || strings.TrimSpace(text) == "" {
				return usagef("check needs --agent NAME and --text RULE")
			}
			msg, err := call(c, cmd, c.rulesClient().CheckConflicts, &preceptv1.CheckConflictsRequest{Subject: &preceptv1.CheckConflictsRequest_Candidate{
				Candidate: &preceptv1.CandidateRule{Agents: agents, Content: text, InsertionPoint: insertion},
			}})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				if len(msg.GetConflicts()) == 0 {
					fmt.Fprintln(w, "no conflicts")
					return
				}
				printConflicts(w, msg.GetConflicts())
			})
		},
	}
	cmd.Flags().StringSliceVar(&agents, "agent", nil, "agent (repeatable)")
	cmd.Flags().StringVar(&text, "text", "", "the rule text")
	cmd.Flags().StringVar(&insertion, "insertion-point", "", "where in the prompt (default learned_rules)")
	return cmd
}
