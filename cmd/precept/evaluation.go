package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// proposalWait is how long evaluation get --wait waits, once the
// decision is evaluated, for the proposal its cluster calls for.
const proposalWait = 5 * time.Second

// awaitingProposal reports whether an evaluation calls for a rule whose
// proposal is not linked yet.
func awaitingProposal(ev *preceptv1.Evaluation) bool {
	a := ev.GetProposedAction()
	return a.GetType() == preceptv1.ActionType_ACTION_TYPE_CREATE_RULE && a.GetProposalId() == ""
}

func printEvaluation(w io.Writer, ev *preceptv1.Evaluation) {
	action := ""
	if a := ev.GetProposedAction(); a != nil && a.GetType() != preceptv1.ActionType_ACTION_TYPE_UNSPECIFIED {
		action = strings.TrimPrefix(a.GetType().String(), "ACTION_TYPE_")
		if a.GetPriority() != "" {
			action += " (" + a.GetPriority() + " priority)"
		}
		if a.GetProposalId() != "" {
			action += ", proposal " + a.GetProposalId()
		}
	}
	fields(w,
		"class", fmt.Sprintf("%s (confidence %.2f)", className(ev.GetClassification()), ev.GetConfidence()),
		"rationale", ev.GetRationale(),
		"cluster", ev.GetClusterId(),
		"similar", strings.Join(ev.GetSimilarFeedbackIds(), ", "),
		"action", action,
		"evaluator", ev.GetEvaluator(),
	)
}

func (c *cli) evaluatorClient() preceptv1connect.EvaluatorServiceClient {
	return preceptv1connect.NewEvaluatorServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
}

func (c *cli) evaluationCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "evaluation", Short: "Read the evaluator's decisions"}
	var wait time.Duration
	get := &cobra.Command{
		Use:   "get DECISION_ID [--wait DURATION]",
		Short: "Show how a decision was classified, and why",
		Args:  exactArgs(1, "get needs one DECISION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *connect.Response[preceptv1.GetEvaluationResponse]
			var drafting time.Time
			err := poll(cmd, c.timeout, wait, func(ctx context.Context) (done bool, err error) {
				resp, err = c.evaluatorClient().GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: args[0]}))
				if err != nil || !awaitingProposal(resp.Msg.GetEvaluation()) {
					return err == nil, err
				}
				// Evaluated, and calling for a rule the rule manager drafts
				// a moment later: give it a few seconds to link.
				if drafting.IsZero() {
					drafting = time.Now()
				}
				return time.Since(drafting) > proposalWait, nil
			})
			if err != nil {
				return err
			}
			return c.emit(resp.Msg, func(w io.Writer) {
				ev := resp.Msg.Evaluation
				fields(w, "decision", ev.GetDecisionId())
				printEvaluation(w, ev)
				if st := ev.GetClusterStats(); st != nil {
					fields(w, "support", support(st))
				}
				printRubric(w, ev.GetRubric())
			})
		},
	}
	addWait(get, &wait, "for the decision to be evaluated (and, when it calls for a rule, up to 5s more for its proposal)")
	cmd.AddCommand(get)
	return cmd
}

func printRubric(w io.Writer, r *preceptv1.RubricResult) {
	if r == nil {
		return
	}
	verdict := "passed"
	if !r.GetPassed() {
		verdict = "failed"
	}
	fmt.Fprintf(w, "\nclarity rubric %s: %d/%d attributes (needs %d), confidence %.2f (needs %.2f)\n",
		verdict, r.GetMet(), len(r.GetAttributes()), r.GetRequired(), r.GetConfidence(), r.GetMinConfidence())
	for _, a := range r.GetAttributes() {
		mark := "  -"
		if a.GetPresent() {
			mark = "  ✓"
		}
		fmt.Fprintf(w, "%s %s", mark, strings.ReplaceAll(a.GetName(), "_", " "))
		if a.GetEvidence() != "" {
			fmt.Fprintf(w, ": %s", line(a.GetEvidence()))
		}
		fmt.Fprintln(w)
	}
}

func (c *cli) similarCmd() *cobra.Command {
	var agent, decision string
	var threshold float64
	var limit int32
	cmd := &cobra.Command{
		Use:   `similar ["TEXT"] [--decision ID] [--agent NAME]`,
		Short: "Find stored feedback similar to a text or a decision",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &preceptv1.FindSimilarRequest{Agent: agent, Threshold: threshold, Limit: limit}
			switch {
			case len(args) == 1 && decision == "":
				req.Query = &preceptv1.FindSimilarRequest_Text{Text: args[0]}
			case len(args) == 0 && decision != "":
				req.Query = &preceptv1.FindSimilarRequest_DecisionId{DecisionId: decision}
			default:
				return usagef(`similar needs a "TEXT" or --decision ID (one of them)`)
			}
			msg, err := call(c, cmd, c.feedbackClient().FindSimilar, req)
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				if len(msg.Results) == 0 {
					fmt.Fprintln(w, "no similar feedback above the threshold")
					return
				}
				var rows [][]string
				for _, r := range msg.Results {
					rows = append(rows, []string{fmt.Sprintf("%.2f", r.GetSimilarity()), r.GetDecisionId(), r.GetAgent(), r.GetReviewerId(), r.GetClusterId(), clip(r.GetText(), 60)})
				}
				table(w, []string{"SIMILARITY", "DECISION", "AGENT", "REVIEWER", "CLUSTER", "TEXT"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only feedback on this agent")
	cmd.Flags().StringVar(&decision, "decision", "", "search with a stored decision's text")
	cmd.Flags().Float64Var(&threshold, "threshold", 0, "cosine similarity threshold (default: the server's, 0.8)")
	cmd.Flags().Int32Var(&limit, "limit", 10, "most results (max 100)")
	return cmd
}

func (c *cli) clustersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "clusters", Short: "Inspect clusters of similar negative feedback"}
	var agent, token string
	var minSize, limit int32
	list := &cobra.Command{
		Use:   "list [--agent NAME]",
		Short: "List clusters, largest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.evaluatorClient().ListClusters, &preceptv1.ListClustersRequest{Agent: agent, MinSize: minSize, PageSize: limit, PageToken: token})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				var rows [][]string
				for _, cl := range msg.Clusters {
					st := cl.GetStats()
					rep := ""
					if len(cl.GetRepresentatives()) > 0 {
						rep = cl.GetRepresentatives()[0].GetText()
					}
					rows = append(rows, []string{cl.GetId(), className(cl.GetClassification()), fmt.Sprint(st.GetSize()), fmt.Sprint(st.GetDistinctReviewers()),
						fmt.Sprint(st.GetDistinctEpics()), strings.Join(st.GetAgents(), ","), orDash(cl.GetProposalId()), clip(rep, 50)})
				}
				table(w, []string{"CLUSTER", "CLASS", "SIZE", "REVIEWERS", "EPICS", "AGENTS", "PROPOSAL", "REPRESENTATIVE"}, rows)
				if msg.NextPageToken != "" {
					fmt.Fprintf(w, "\nmore: --page-token %s\n", msg.NextPageToken)
				}
			})
		},
	}
	list.Flags().StringVar(&agent, "agent", "", "only clusters that include this agent")
	list.Flags().Int32Var(&minSize, "min-size", 2, "only clusters with at least this many decisions")
	list.Flags().Int32Var(&limit, "limit", 50, "clusters per page (max 1000)")
	list.Flags().StringVar(&token, "page-token", "", "continue a previous listing")
	show := &cobra.Command{
		Use:   "show CLUSTER_ID",
		Short: "Show a cluster: its statistics, members and central comments",
		Args:  exactArgs(1, "show needs one CLUSTER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.evaluatorClient().GetCluster, &preceptv1.GetClusterRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				cl := msg.Cluster
				st := cl.GetStats()
				fields(w,
					"cluster", cl.GetId(),
					"class", className(cl.GetClassification())+notPatternNote(cl.GetNotAPattern()),
					"category", cl.GetCategory(),
					"support", support(st),
					"agents", strings.Join(st.GetAgents(), ", "),
					"seen", ts(st.GetFirstSeen())+" … "+ts(st.GetLastSeen()),
					"tags", strings.Join(cl.GetTags(), ", "),
					"proposal", cl.GetProposalId(),
					"members", strings.Join(cl.GetMemberIds(), ", "),
				)
				fmt.Fprintln(w, "\nmost central comments:")
				for _, r := range cl.GetRepresentatives() {
					fmt.Fprintf(w, "  %.2f  %s (%s): %s\n", r.GetCentrality(), line(r.GetDecisionId()), line(r.GetReviewerId()), line(clip(r.GetText(), 100)))
				}
			})
		},
	}
	cmd.AddCommand(list, show)
	cmd.AddCommand(c.correctionCmds()...)
	return cmd
}

func notPatternNote(marked bool) string {
	if marked {
		return " (a curator marked it not a pattern)"
	}
	return ""
}

func (c *cli) reviewCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "review", Short: "Ambiguous decisions that need a human"}
	var agent string
	list := &cobra.Command{
		Use:   "list [--agent NAME]",
		Short: "List ambiguous decisions and the rubric attributes they miss",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.evaluatorClient().ListNeedsReview, &preceptv1.ListNeedsReviewRequest{Agent: agent})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				var rows [][]string
				for _, r := range msg.Items {
					missing := make([]string, len(r.GetMissingAttributes()))
					for i, m := range r.GetMissingAttributes() {
						missing[i] = strings.ReplaceAll(m, "_", " ")
					}
					rows = append(rows, []string{r.GetDecisionId(), r.GetAgent(), r.GetReviewerId(), r.GetStatus(), fmt.Sprint(r.GetAttempts()),
						strings.Join(missing, ", "), orDash(clip(r.GetReviewerComment(), 40))})
				}
				table(w, []string{"DECISION", "AGENT", "REVIEWER", "STATUS", "ASKED", "MISSING", "COMMENT"}, rows)
			})
		},
	}
	list.Flags().StringVar(&agent, "agent", "", "only this agent's decisions")
	cmd.AddCommand(list)
	return cmd
}

// support describes what backs a cluster, with its producers when known.
func support(st *preceptv1.ClusterStats) string {
	s := fmt.Sprintf("%d decisions, %d distinct reviewers, %d distinct epics", st.GetSize(), st.GetDistinctReviewers(), st.GetDistinctEpics())
	if len(st.GetProducers()) > 0 {
		s += fmt.Sprintf(", recorded by %s", strings.Join(st.GetProducers(), ", "))
	}
	return s
}
