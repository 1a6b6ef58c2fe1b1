package rulefmt

import (
	"context"
	"slices"
	"strings"
	"time"
)

// The cluster classes that may support a rule (docs/thresholds.md, "Cluster support").
const (
	ClassGeneralizableLow  = "GENERALIZABLE_LOW"
	ClassGeneralizableHigh = "GENERALIZABLE_HIGH"
)

// Evidence is a cluster of similar negative feedback that may support a
// rule.
type Evidence struct {
	ClusterID   string
	Class       string // "GENERALIZABLE_LOW" or "GENERALIZABLE_HIGH"
	Confidence  float64
	Agents      []string // distinct, sorted
	FeedbackIDs []string
	Reviewers   []string // distinct
	Epics       []string // distinct
	// Producers are who handed the decisions to precept: API token
	// names and streams (precept.Feedback.Producer), distinct.
	Producers []string
	Tags      []string  // union of member tags, lower-case
	Comments  []Comment // most central first
	Size      int
	FirstSeen time.Time
	LastSeen  time.Time
	// The lesson the cluster teaches (docs/lessons.md): its taxonomy
	// category, the category's canonical rule, whether it is protected,
	// and what the members' reviewers asked for, most central first.
	Category     string
	CategoryRule string
	Protected    bool
	Asked        []string
	// AskedBy are the decisions whose reviewers asked Asked, one for
	// each; empty when the source does not say.
	AskedBy []string
}

// Comment is one reviewer comment of a cluster.
type Comment struct {
	DecisionID string
	ReviewerID string
	Agent      string
	Text       string
	// Centrality is how close the comment is to the cluster's centre.
	Centrality float64
}

// EvidenceSource supplies the generalizable clusters the proposer drafts
// rules from; the evaluator implements it.
type EvidenceSource interface {
	// Generalizable returns every cluster currently classified
	// GENERALIZABLE_LOW or GENERALIZABLE_HIGH.
	Generalizable(ctx context.Context) ([]Evidence, error)
}

// EvidenceFunc is a function as an EvidenceSource.
type EvidenceFunc func(ctx context.Context) ([]Evidence, error)

// Generalizable implements EvidenceSource.
func (f EvidenceFunc) Generalizable(ctx context.Context) ([]Evidence, error) { return f(ctx) }

// ClusterEvidenceSource is an EvidenceSource that also reads one
// cluster's evidence by id, without reading every cluster.
type ClusterEvidenceSource interface {
	EvidenceSource
	// ClusterEvidence is the evidence of the generalizable cluster id;
	// false when there is no such cluster or it is not generalizable.
	ClusterEvidence(ctx context.Context, id string) (Evidence, bool, error)
}

// ClusterRef is a generalizable cluster as a listing names it, without
// its evidence: enough for the proposer to see that a cluster will not
// be drafted (it has an open proposal or a rule, or a held draft with at
// least Size support) before reading its evidence.
type ClusterRef struct {
	ID    string
	Class string
	// Size is the cluster's member count, which bounds its evidence's
	// Support from above.
	Size int
}

// ClusterLister is an EvidenceSource that also lists its generalizable
// clusters cheaply and reads the evidence of some of them: the proposer
// then reads the evidence of only the clusters it may draft. A source
// whose listing is not available says listed false.
type ClusterLister interface {
	EvidenceSource
	GeneralizableClusters(ctx context.Context) (refs []ClusterRef, listed bool, err error)
	// EvidenceOf is the evidence of those of ids that are generalizable.
	EvidenceOf(ctx context.Context, ids []string) ([]Evidence, error)
}

// EvidenceFuncs are functions as a ClusterEvidenceSource and, with List
// and Some, a ClusterLister.
type EvidenceFuncs struct {
	All  func(ctx context.Context) ([]Evidence, error)
	One  func(ctx context.Context, id string) (Evidence, bool, error)
	List func(ctx context.Context) ([]ClusterRef, error)
	Some func(ctx context.Context, ids []string) ([]Evidence, error)
}

// GeneralizableClusters implements ClusterLister; listed is false
// without List and Some.
func (f EvidenceFuncs) GeneralizableClusters(ctx context.Context) ([]ClusterRef, bool, error) {
	if f.List == nil || f.Some == nil {
		return nil, false, nil
	}
	refs, err := f.List(ctx)
	return refs, err == nil, err
}

// EvidenceOf implements ClusterLister.
func (f EvidenceFuncs) EvidenceOf(ctx context.Context, ids []string) ([]Evidence, error) {
	return f.Some(ctx, ids)
}

// Generalizable implements EvidenceSource.
func (f EvidenceFuncs) Generalizable(ctx context.Context) ([]Evidence, error) { return f.All(ctx) }

// ClusterEvidence implements ClusterEvidenceSource.
func (f EvidenceFuncs) ClusterEvidence(ctx context.Context, id string) (Evidence, bool, error) {
	return f.One(ctx, id)
}

// Support is how many distinct decisions back the evidence.
func (e Evidence) Support() int {
	if n := len(Distinct(e.FeedbackIDs)); n > 0 {
		return n
	}
	return e.Size
}

// Priority maps the class to the proposal priority.
func (e Evidence) Priority() string {
	if e.Class == ClassGeneralizableHigh {
		return "high"
	}
	return "low"
}

// Distinct returns the non-empty values of in, deduplicated and sorted.
func Distinct(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Clone returns a copy of e that shares no slice with it.
func (e Evidence) Clone() Evidence {
	e.Agents, e.FeedbackIDs, e.Reviewers = slices.Clone(e.Agents), slices.Clone(e.FeedbackIDs), slices.Clone(e.Reviewers)
	e.Epics, e.Producers, e.Tags = slices.Clone(e.Epics), slices.Clone(e.Producers), slices.Clone(e.Tags)
	e.Comments, e.Asked, e.AskedBy = slices.Clone(e.Comments), slices.Clone(e.Asked), slices.Clone(e.AskedBy)
	return e
}
