package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/text"
)

// dlqCmd lists, replays and drops dead-lettered stream entries
// (docs/formats.md, "Dead-letter entries").
func (c *cli) dlqCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "dlq", Short: "Inspect, replay and drop stream entries that were dead-lettered"}
	cmd.AddCommand(c.dlqListCmd(), c.dlqReplayCmd(), c.dlqDropCmd())
	return cmd
}

func (c *cli) dlqListCmd() *cobra.Command {
	var limit int32
	var token string
	var wait time.Duration
	list := &cobra.Command{
		Use:   "list [--wait DURATION]",
		Short: "List dead-lettered entries with their reasons, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *connect.Response[preceptv1.ListDeadLettersResponse]
			err := poll(cmd, c.timeout, wait, func(ctx context.Context) (done bool, err error) {
				resp, err = c.feedbackClient().ListDeadLetters(ctx, connect.NewRequest(&preceptv1.ListDeadLettersRequest{PageSize: limit, PageToken: token}))
				return err == nil && len(resp.Msg.GetDeadLetters()) > 0, err
			})
			if err != nil {
				return err
			}
			return c.emit(resp.Msg, func(w io.Writer) {
				fmt.Fprintf(w, "%s\n\n", text.Plural(int(resp.Msg.Total), "1 dead-lettered entry", fmt.Sprintf("%d dead-lettered entries", resp.Msg.Total)))
				for _, d := range resp.Msg.DeadLetters {
					printDeadLetter(w, d)
				}
				if resp.Msg.NextPageToken != "" {
					fmt.Fprintf(w, "more: --page-token %s\n", resp.Msg.NextPageToken)
				}
			})
		},
	}
	list.Flags().Int32Var(&limit, "limit", 50, "entries per page (max 1000; a page also ends at 4 MiB)")
	list.Flags().StringVar(&token, "page-token", "", "continue a previous listing")
	addWait(list, &wait, "for at least one entry")
	return list
}

func printDeadLetter(w io.Writer, d *preceptv1.DeadLetter) {
	fmt.Fprintf(w, "%s  %s  entry %s  (delivered %d×, by %s)\n  reason: %s\n", d.GetId(), ts(d.GetFailedAt()), d.GetOriginalId(), d.GetDeliveries(), d.GetConsumer(), d.GetReason())
	kept := "kept whole, can be replayed"
	switch {
	case !d.GetWhole():
		kept = "kept truncated, cannot be replayed"
	case d.GetTruncated():
		kept = "kept whole, shown truncated, can be replayed"
	}
	fmt.Fprintf(w, "  original: %d bytes in %s, sha256 %s; %s\n", d.GetOriginalBytes(),
		text.Plural(int(d.GetOriginalFields()), "1 field", fmt.Sprintf("%d fields", d.GetOriginalFields())), d.GetOriginalSha256(), kept)
	var parts []string
	for _, f := range d.GetFields() {
		parts = append(parts, printable(f.GetName())+"="+clip(printable(f.GetValue()), 40))
	}
	fmt.Fprintf(w, "  fields: %s\n\n", strings.Join(parts, " "))
}

func (c *cli) dlqReplayCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "replay ID...",
		Short: "Re-queue dead letters onto the decision stream once their cause is fixed (role admin; audited)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			msg, err := call(c, cmd, c.feedbackClient().ReplayDeadLetters, &preceptv1.ReplayDeadLettersRequest{Ids: ids})
			if err != nil {
				return err
			}
			return c.outcomes(msg, msg.GetOutcomes(), "replayed")
		},
	}
}

func (c *cli) dlqDropCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "drop ID...",
		Short: "Remove dead letters for good (role admin; audited)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			msg, err := call(c, cmd, c.feedbackClient().DropDeadLetters, &preceptv1.DropDeadLettersRequest{Ids: ids})
			if err != nil {
				return err
			}
			return c.outcomes(msg, msg.GetOutcomes(), "dropped")
		},
	}
}

// outcomes prints what became of each dead letter and fails when any was
// left as it was.
func (c *cli) outcomes(msg proto.Message, outs []*preceptv1.DeadLetterOutcome, done string) error {
	if err := c.emit(msg, func(w io.Writer) {
		for _, o := range outs {
			switch {
			case !o.GetDone():
				fmt.Fprintf(w, "%s: not %s: %s\n", o.GetId(), done, o.GetError())
			case o.GetStreamId() != "":
				fmt.Fprintf(w, "%s: %s as stream entry %s\n", o.GetId(), done, o.GetStreamId())
			default:
				fmt.Fprintf(w, "%s: %s\n", o.GetId(), done)
			}
		}
	}); err != nil {
		return err
	}
	failed := 0
	for _, o := range outs {
		if !o.GetDone() {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d dead letters not %s", failed, len(outs), done)
	}
	return nil
}
