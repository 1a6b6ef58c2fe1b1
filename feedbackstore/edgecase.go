package feedbackstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/precept-dev/precept/lib/text"

	"github.com/precept-dev/precept/lib/gitrepo"
)

// EdgeCasesDir is where edge cases are documented in the feedback
// repository, one Markdown file per decision, for people to read.
const EdgeCasesDir = "feedback/edge_cases"

// EdgeCase documents a decision whose feedback is clear but not (yet)
// supported by enough similar feedback to generalise.
type EdgeCase struct {
	DecisionID        string
	Agent             string
	ClusterID         string
	ClusterSize       int
	DistinctReviewers int
	DistinctEpics     int
	// DecidedAt is when the reviewer decided.
	DecidedAt  time.Time
	Rationale  string
	Comment    string
	Correction string
	// Remove drops the document: the decision is no longer an edge case.
	Remove bool
}

// EdgeCasePath returns the file that documents a decision's edge case.
func EdgeCasePath(id string) string { return EdgeCasesDir + "/" + id + ".md" }

// WriteEdgeCases writes and removes edge-case documents in one commit on
// the feedback branch.
func (s *Store) WriteEdgeCases(ctx context.Context, docs []EdgeCase) error {
	_, err := s.update(ctx, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		var changes []gitrepo.Change
		added, removed := 0, 0
		for _, d := range docs {
			path := EdgeCasePath(d.DecisionID)
			if d.Remove {
				if ok, err := snap.Exists(path); err != nil {
					return nil, err
				} else if ok {
					changes = append(changes, gitrepo.Change{Path: path, Delete: true})
					removed++
				}
				continue
			}
			changes = append(changes, gitrepo.Change{Path: path, Data: []byte(renderEdgeCase(d))})
			added++
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("Document %d %s, drop %d", added, text.Plural(added, "edge case", "edge cases"), removed),
			Changes: changes,
		}, nil
	})
	return err
}

// renderEdgeCase is an edge case's Markdown: front matter with the
// cluster's support, the rationale, the reviewer's comment quoted and the
// correction as a diff.
func renderEdgeCase(d EdgeCase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\ndecision_id: %s\nagent: %s\ncluster_id: %s\ncluster_size: %d\ndistinct_reviewers: %d\ndistinct_epics: %d\ndecided_at: %s\n---\n\n",
		d.DecisionID, d.Agent, d.ClusterID, d.ClusterSize, d.DistinctReviewers, d.DistinctEpics, d.DecidedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "# Edge case: %s\n\n%s\n\n## Reviewer comment\n\n%s\n", d.DecisionID, d.Rationale, quote(d.Comment))
	if d.Correction != "" {
		fmt.Fprintf(&b, "\n## Correction\n\n```diff\n%s\n```\n", d.Correction)
	}
	return b.String()
}

// quote renders text as a Markdown block quote.
func quote(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none)"
	}
	return "> " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n> ")
}
