package evaluator

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// CorrectionKind is what a curator corrected (docs/lessons.md,
// "Curator corrections").
type CorrectionKind string

// The corrections a curator can make.
const (
	// CorrectMerge puts the members of Clusters (two or more) together.
	CorrectMerge CorrectionKind = "merge"
	// CorrectSplit takes Decisions out of Clusters[0] into a cluster of
	// their own, and keeps them apart from the rest.
	CorrectSplit CorrectionKind = "split"
	// CorrectMove moves Decisions into Clusters[0], and keeps them apart
	// from the cluster they were in.
	CorrectMove CorrectionKind = "move"
	// CorrectCategory sets the category of Decisions to Category.
	CorrectCategory CorrectionKind = "set_category"
	// CorrectNotAPattern marks Clusters[0] as not a pattern: its members
	// stay edge cases however much support it gathers.
	CorrectNotAPattern CorrectionKind = "not_a_pattern"
	// CorrectKeepApart keeps the members of Clusters (two) apart: the
	// answer to a merge suggestion a curator declined.
	CorrectKeepApart CorrectionKind = "keep_apart"
)

// Correction is one curator correction, as recorded in the feedback
// repository (who, when, why) and applied by every replica in feed order.
// Cluster ids name clusters as they were when the curator looked; the
// correction is applied to their members then, so it survives the ids
// changing later.
type Correction struct {
	ID        string         `json:"id"`
	Kind      CorrectionKind `json:"kind"`
	Clusters  []string       `json:"clusters,omitempty"`
	Decisions []string       `json:"decisions,omitempty"`
	Category  string         `json:"category,omitempty"`
	By        string         `json:"by"`
	At        time.Time      `json:"at"`
	Why       string         `json:"why,omitempty"`
	// Members are the decisions of Clusters when the curator made the
	// correction, Former the rest of the clusters the moved or split-off
	// Decisions were in, and Into the category moved decisions go to.
	// The replica that records the correction fills them in
	// (CheckCorrection), so every replica applies the same correction
	// whatever its clusters look like, and later re-clustering passes know whom it was
	// about whatever the ids became.
	Members [][]string `json:"members,omitempty"`
	Former  []string   `json:"former,omitempty"`
	Into    string     `json:"into,omitempty"`
}

// Limits on a correction.
const (
	maxCorrectionDecisions = 1000
	maxCorrectionClusters  = 100
	maxCorrectionWhy       = 2000
	maxCorrectionID        = 256
)

// Validate checks a correction's shape; whether its clusters and
// decisions exist is checked when it is applied.
func (c Correction) Validate() error {
	var errs []error
	need := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	switch c.Kind {
	case CorrectMerge:
		need(len(c.Clusters) >= 2, "merge needs at least two clusters")
	case CorrectKeepApart:
		need(len(c.Clusters) == 2, "keep_apart needs exactly two clusters")
	case CorrectSplit:
		need(len(c.Clusters) == 1 && len(c.Decisions) > 0, "split needs one cluster and the decisions to take out of it")
	case CorrectMove:
		need(len(c.Clusters) == 1 && len(c.Decisions) > 0, "move needs the target cluster and the decisions to move")
	case CorrectCategory:
		need(len(c.Decisions) > 0 && c.Category != "", "set_category needs decisions and a category")
	case CorrectNotAPattern:
		need(len(c.Clusters) == 1, "not_a_pattern needs one cluster")
	default:
		errs = append(errs, fmt.Errorf("unknown correction kind %q", c.Kind))
	}
	// What a kind does not use is refused rather than ignored.
	need(c.Kind == CorrectCategory || c.Category == "", "category is only for set_category")
	need(c.Kind != CorrectCategory || len(c.Clusters) == 0, "set_category takes decisions, not clusters")
	need(c.Kind == CorrectSplit || c.Kind == CorrectMove || c.Kind == CorrectCategory || len(c.Decisions) == 0,
		"%s takes clusters, not decisions", c.Kind)
	need(len(c.Decisions) <= maxCorrectionDecisions, "at most %d decisions", maxCorrectionDecisions)
	need(len(c.Clusters) <= maxCorrectionClusters, "at most %d clusters", maxCorrectionClusters)
	need(len(c.Why) <= maxCorrectionWhy, "why: at most %d bytes", maxCorrectionWhy)
	need(strings.TrimSpace(c.By) != "", "who made the correction is missing")
	seen := map[string]bool{}
	for _, id := range c.Clusters {
		need(plainID(id) && !seen[id], "cluster ids must be distinct, 1-%d printable characters", maxCorrectionID)
		seen[id] = true
	}
	for _, id := range c.Decisions {
		need(plainID(id), "decision ids must be 1-%d printable characters", maxCorrectionID)
	}
	need(c.Category == "" || plainID(c.Category), "category must be 1-%d printable characters", maxCorrectionID)
	return errors.Join(errs...)
}

// plainID reports whether an id is non-empty, bounded and printable: ids
// go into commit messages and logs.
func plainID(id string) bool {
	if id == "" || len(id) > maxCorrectionID || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
