package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/text"
)

// correctionCmds are the curator's corrections to clustering and
// classification (docs/lessons.md, "Curator corrections"), and the
// suggestions that lead to them.
func (c *cli) correctionCmds() []*cobra.Command {
	var why, to, category string
	correct := func(cmd *cobra.Command, req *preceptv1.CorrectClustersRequest) error {
		req.Why = why
		msg, err := call(c, cmd, c.evaluatorClient().CorrectClusters, req)
		if err != nil {
			return err
		}
		return c.emit(msg, func(w io.Writer) {
			state := "recorded; the evaluator applies it shortly"
			if msg.GetApplied() {
				state = "recorded and applied"
			}
			fmt.Fprintf(w, "correction %s %s\n", line(msg.GetCorrectionId()), state)
		})
	}
	kind := func(k preceptv1.CorrectionKind) *preceptv1.CorrectClustersRequest {
		return &preceptv1.CorrectClustersRequest{Kind: k}
	}
	merge := &cobra.Command{
		Use:   "merge CLUSTER CLUSTER... [--why TEXT]",
		Short: "Merge clusters that are one problem (the largest keeps its id)",
		Args:  minArgs(2, "merge needs two or more CLUSTER ids"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := kind(preceptv1.CorrectionKind_CORRECTION_KIND_MERGE)
			req.ClusterIds = args
			return correct(cmd, req)
		},
	}
	split := &cobra.Command{
		Use:   "split CLUSTER DECISION... [--why TEXT]",
		Short: "Take decisions out of a cluster into a cluster of their own",
		Args:  minArgs(2, "split needs a CLUSTER id and the DECISION ids to take out"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := kind(preceptv1.CorrectionKind_CORRECTION_KIND_SPLIT)
			req.ClusterIds, req.DecisionIds = args[:1], args[1:]
			return correct(cmd, req)
		},
	}
	move := &cobra.Command{
		Use:   "move DECISION... --to CLUSTER [--why TEXT]",
		Short: "Move decisions into another cluster",
		Args:  minArgs(1, "move needs DECISION ids and --to CLUSTER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return usagef("move needs --to CLUSTER")
			}
			req := kind(preceptv1.CorrectionKind_CORRECTION_KIND_MOVE)
			req.ClusterIds, req.DecisionIds = []string{to}, args
			return correct(cmd, req)
		},
	}
	move.Flags().StringVar(&to, "to", "", "the cluster to move the decisions into")
	categorize := &cobra.Command{
		Use:   "categorize DECISION... --category ID [--why TEXT]",
		Short: "Set the lesson category of decisions",
		Args:  minArgs(1, "categorize needs DECISION ids and --category ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if category == "" {
				return usagef("categorize needs --category ID (a taxonomy category)")
			}
			req := kind(preceptv1.CorrectionKind_CORRECTION_KIND_SET_CATEGORY)
			req.DecisionIds, req.Category = args, category
			return correct(cmd, req)
		},
	}
	categorize.Flags().StringVar(&category, "category", "", "the taxonomy category id")
	notPattern := &cobra.Command{
		Use:   "not-a-pattern CLUSTER [--why TEXT]",
		Short: "Mark a cluster as not a pattern: its decisions stay edge cases",
		Args:  exactArgs(1, "not-a-pattern needs one CLUSTER id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := kind(preceptv1.CorrectionKind_CORRECTION_KIND_NOT_A_PATTERN)
			req.ClusterIds = args
			return correct(cmd, req)
		},
	}
	keepApart := &cobra.Command{
		Use:   "keep-apart CLUSTER CLUSTER [--why TEXT]",
		Short: "Keep two clusters apart (decline a merge suggestion)",
		Args:  exactArgs(2, "keep-apart needs two CLUSTER ids"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := kind(preceptv1.CorrectionKind_CORRECTION_KIND_KEEP_APART)
			req.ClusterIds = args
			return correct(cmd, req)
		},
	}
	for _, cmd := range []*cobra.Command{merge, split, move, categorize, notPattern, keepApart} {
		cmd.Flags().StringVar(&why, "why", "", "why, for the record")
	}
	var limit int32
	suggest := &cobra.Command{
		Use:   "suggest [--limit N]",
		Short: "Pairs of clusters that read like one problem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.evaluatorClient().SuggestMerges, &preceptv1.SuggestMergesRequest{Limit: limit})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				if len(msg.Suggestions) == 0 {
					fmt.Fprintln(w, "no clusters read like one problem")
					return
				}
				var rows [][]string
				for _, s := range msg.Suggestions {
					rows = append(rows, []string{fmt.Sprintf("%.2f", s.GetSimilarity()), s.GetClusterA(), s.GetClusterB(), s.GetAgent(),
						s.GetCategoryA() + " / " + s.GetCategoryB()})
				}
				table(w, []string{"SIMILARITY", "CLUSTER", "CLUSTER", "AGENT", "CATEGORIES"}, rows)
				fmt.Fprintln(w, "\nmerge with: precept clusters merge A B; decline with: precept clusters keep-apart A B")
			})
		},
	}
	suggest.Flags().Int32Var(&limit, "limit", 20, "most suggestions (max 100)")
	recluster := &cobra.Command{
		Use:   "recluster",
		Short: "Re-cluster the changed groups now (it also runs periodically)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.evaluatorClient().Recluster, &preceptv1.ReclusterRequest{})
			if err != nil {
				return err
			}
			return c.emit(msg, func(w io.Writer) {
				m := msg
				fmt.Fprintf(w, "re-clustered %d groups (%d decisions) in %d ms: %d moved, %d reclassified\n",
					m.GetGroups(), m.GetDecisions(), m.GetTookMs(), m.GetMoved(), m.GetReclassified())
			})
		},
	}
	return []*cobra.Command{merge, split, move, categorize, notPattern, keepApart, suggest, recluster}
}

// taxonomyCmd shows what curators' corrections taught the classifier, and
// merges it into a curator's taxonomy file for review.
func (c *cli) taxonomyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "taxonomy", Short: "The lesson taxonomy curators extend"}
	var merge string
	learned := &cobra.Command{
		Use:   "learned [--merge FILE]",
		Short: "Phrasings curators' corrections taught, as a taxonomy file (or merged into FILE)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg, err := call(c, cmd, c.evaluatorClient().GetLearnedTaxonomy, &preceptv1.GetLearnedTaxonomyRequest{})
			if err != nil {
				return err
			}
			if merge == "" {
				return c.emit(msg, func(w io.Writer) { fmt.Fprint(w, msg.GetYaml()) })
			}
			var learned lesson.Learned
			var f struct {
				Categories []lesson.Category `yaml:"categories"`
			}
			if err := yaml.Unmarshal([]byte(msg.GetYaml()), &f); err != nil {
				return fmt.Errorf("the server's learned taxonomy: %w", err)
			}
			learned = lesson.Learned{}
			for _, cat := range f.Categories {
				learned[cat.ID] = cat.Phrasings
			}
			old, err := os.ReadFile(merge)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			out, added, err := lesson.MergeLearned(old, learned)
			if err != nil {
				return err
			}
			if added > 0 {
				tmp := merge + ".tmp"
				if err := os.WriteFile(tmp, out, 0o644); err != nil {
					return err
				}
				if err := os.Rename(tmp, merge); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %d learned %s to %s; review the change (git diff) before preceptd reloads it\n",
				added, text.Plural(added, "phrasing", "phrasings"), merge)
			return nil
		},
	}
	learned.Flags().StringVar(&merge, "merge", "", "merge into this taxonomy file (evaluator.taxonomy_file) instead of printing")
	cmd.AddCommand(learned)
	return cmd
}
