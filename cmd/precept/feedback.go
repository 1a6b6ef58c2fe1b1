package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/internal/api/convert"
)

func (c *cli) feedbackCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "feedback", Short: "Record and read HITL decisions"}

	var file string
	record := &cobra.Command{
		Use:   "record -f EVENT.json",
		Short: "Record one decision (the stream's JSON event format; - reads stdin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usagef("record needs -f EVENT.json (or -f - for stdin)")
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(c.stdin)
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("read event: %w", err)
			}
			d, err := precept.ParseDecisionJSON(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			msg, err := call(c, cmd, c.feedbackClient().RecordFeedback, &preceptv1.RecordFeedbackRequest{Decision: convert.DecisionToProto(d)})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				if msg.Created {
					fmt.Fprintf(w, "recorded %s in commit %s\n", msg.DecisionId, short(msg.Feedback.GetCommit()))
				} else {
					fmt.Fprintf(w, "%s was already recorded (commit %s); nothing changed\n", msg.DecisionId, short(msg.Feedback.GetCommit()))
				}
			})
		},
	}
	record.Flags().StringVarP(&file, "file", "f", "", "event JSON file, or - for stdin")

	var wait time.Duration
	get := &cobra.Command{
		Use:   "get DECISION_ID [--wait DURATION]",
		Short: "Show one stored decision",
		Args:  exactArgs(1, "get needs one DECISION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *connect.Response[preceptv1.GetFeedbackResponse]
			err := poll(cmd, c.timeout, wait, func(ctx context.Context) (done bool, err error) {
				resp, err = c.feedbackClient().GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: args[0]}))
				return err == nil, err
			})
			if err != nil {
				return err
			}
			return c.emit(resp.Msg, func(w io.Writer) { printFeedback(w, resp.Msg.Feedback) })
		},
	}
	addWait(get, &wait, "for the decision to be stored")

	var agent, token string
	var limit int32
	list := &cobra.Command{
		Use:   "list --agent NAME",
		Short: "List an agent's decisions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if agent == "" {
				return usagef("list needs --agent NAME")
			}
			msg, err := call(c, cmd, c.feedbackClient().ListFeedbackForAgent, &preceptv1.ListFeedbackForAgentRequest{Agent: agent, PageSize: limit, PageToken: token})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				var rows [][]string
				for _, f := range msg.Feedback {
					d := f.GetDecision()
					class := ""
					if ev := f.GetEvaluation(); ev != nil {
						class = className(ev.GetClassification())
					}
					rows = append(rows, []string{ts(d.GetTimestamp()), d.GetDecisionId(), verdict(d.GetDecision()), d.GetReviewerId(), orDash(class), clip(d.GetReviewerComment(), 60)})
				}
				table(w, []string{"TIME", "DECISION", "VERDICT", "REVIEWER", "CLASS", "COMMENT"}, rows)
				if msg.NextPageToken != "" {
					fmt.Fprintf(w, "\nmore: --page-token %s\n", msg.NextPageToken)
				}
			})
		},
	}
	list.Flags().StringVar(&agent, "agent", "", "agent name")
	list.Flags().Int32Var(&limit, "limit", 50, "decisions per page (max 1000)")
	list.Flags().StringVar(&token, "page-token", "", "continue a previous listing")

	cmd.AddCommand(record, get, list)
	return cmd
}

func (c *cli) pingCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "ping [--wait DURATION]",
		Short: "Check connectivity and show who the server thinks you are",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *connect.Response[preceptv1.PingResponse]
			err := poll(cmd, c.timeout, wait, func(ctx context.Context) (done bool, err error) {
				resp, err = c.pingClient().Ping(ctx, connect.NewRequest(&preceptv1.PingRequest{Message: "ping"}))
				return err == nil, err
			})
			if err != nil {
				return err
			}
			return c.emit(resp.Msg, func(w io.Writer) {
				fmt.Fprintf(w, "ok: %s as %s (%s)\n", c.addr, resp.Msg.Identity, resp.Msg.Role)
			})
		},
	}
	addWait(cmd, &wait, "for preceptd to answer")
	return cmd
}

func printFeedback(w io.Writer, f *preceptv1.Feedback) {
	d := f.GetDecision()
	edit := ""
	if f.EditDistancePercent != nil {
		edit = fmt.Sprintf("%d%% of characters changed", f.GetEditDistancePercent())
	}
	fields(w,
		"decision", d.GetDecisionId(),
		"agent", d.GetAgent(),
		"gate", d.GetGateId(),
		"epic", d.GetEpicId(),
		"task", d.GetTaskId(),
		"verdict", fmt.Sprintf("%s by %s at %s", verdict(d.GetDecision()), d.GetReviewerId(), ts(d.GetTimestamp())),
		"comment", d.GetReviewerComment(),
		"tags", strings.Join(d.GetTags(), ", "),
		"scope", d.GetScopePath(),
		"edit", edit,
		"stored", fmt.Sprintf("%s from %s in commit %s", ts(f.GetReceivedAt()), f.GetSource(), short(f.GetCommit())),
		"producer", f.GetProducer(),
	)
	if ev := f.GetEvaluation(); ev != nil {
		fmt.Fprintln(w)
		printEvaluation(w, ev)
	} else if f.GetEvaluationError() != "" {
		fmt.Fprintf(w, "\nevaluation pending: %s\n", line(f.GetEvaluationError()))
	}
}

func verdict(v preceptv1.Verdict) string {
	return strings.TrimPrefix(v.String(), "VERDICT_")
}

func className(c preceptv1.Classification) string {
	return strings.TrimPrefix(c.String(), "CLASSIFICATION_")
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func exactArgs(n int, msg string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s", msg)
		}
		return nil
	}
}

func minArgs(n int, msg string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s", msg)
		}
		return nil
	}
}
