package rules

import (
	"context"
	"fmt"
	"slices"

	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/english"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Candidate is rule text to check against the active rules and the open
// proposals before (or while) it is proposed.
type Candidate struct {
	Agents         []string
	Content        string
	InsertionPoint string
	// ProposalID, when set, is left out of the comparison: a proposal
	// does not conflict with itself.
	ProposalID string
}

// ruleText is an active rule or an open proposal as the guards compare it.
type ruleText struct {
	ID             string
	Agents         []string
	InsertionPoint string
	Content        string
	// IsRule: an active (or shadow) rule, not a proposal.
	IsRule bool
}

// Thresholds are the similarity bands of reconsolidation (docs/thresholds.md)
// and the rejected-before guard.
type Thresholds struct {
	// Duplicate: above it a draft duplicates an existing rule; default 0.92.
	Duplicate float64
	// Conflict: from it up to Duplicate a draft overlaps (or, with the
	// opposite polarity, opposes) an existing rule; default 0.75.
	Conflict float64
	// Rejected: above it a draft repeats a rejected proposal; default 0.88.
	Rejected float64
}

// DefaultThresholds are the similarity bands of the local embedder
// (docs/thresholds.md says how they were chosen).
func DefaultThresholds() Thresholds {
	return Thresholds{Duplicate: 0.92, Conflict: 0.75, Rejected: 0.88}
}

func (t Thresholds) withDefaults() Thresholds {
	d := DefaultThresholds()
	if t.Duplicate <= 0 {
		t.Duplicate = d.Duplicate
	}
	if t.Conflict <= 0 {
		t.Conflict = d.Conflict
	}
	if t.Rejected <= 0 {
		t.Rejected = d.Rejected
	}
	return t
}

// classifyConflicts compares a candidate with existing rule texts that
// share one of its agents. Opposite polarity ("always …" / "never …") at
// topical similarity is opposing guidance when the insertion point is the
// same, an overlap otherwise, and never a duplicate. Reports are ordered
// by similarity, highest first.
func classifyConflicts(cand Candidate, candVec []float32, others []ruleText, vecs [][]float32, th Thresholds) []rulefmt.ConflictReport {
	var out []rulefmt.ConflictReport
	candPolarity := polarity(cand.Content)
	for i, o := range others {
		agent, shared := sharedAgent(cand.Agents, o.Agents)
		if !shared || o.ID == cand.ProposalID || o.ID == rulefmt.RuleIDFor(cand.ProposalID) && cand.ProposalID != "" {
			continue
		}
		sim := embedding.Cosine(candVec, vecs[i])
		if sim < th.Conflict {
			continue
		}
		opposite := candPolarity*polarity(o.Content) < 0
		what := "proposal"
		if o.IsRule {
			what = "rule"
		}
		r := rulefmt.ConflictReport{OtherID: o.ID, Similarity: round3(sim), OtherContent: o.Content, Agent: agent, InsertionPoint: o.InsertionPoint}
		switch {
		case opposite && o.InsertionPoint == cand.InsertionPoint:
			r.Kind = rulefmt.ConflictOpposing
			r.Explanation = fmt.Sprintf("opposing guidance: the %s %s gives %s the opposite instruction on the same topic at %s (similarity %.2f)",
				what, o.ID, agent, o.InsertionPoint, sim)
		case opposite:
			r.Kind = rulefmt.ConflictOverlap
			r.Explanation = fmt.Sprintf("the %s %s covers the same topic with the opposite instruction, at a different insertion point (%s; similarity %.2f)",
				what, o.ID, o.InsertionPoint, sim)
		case sim > th.Duplicate:
			r.Kind = rulefmt.ConflictDuplicate
			r.Explanation = fmt.Sprintf("duplicates the %s %s (similarity %.2f > %.2f)", what, o.ID, sim, th.Duplicate)
		default:
			r.Kind = rulefmt.ConflictOverlap
			r.Explanation = fmt.Sprintf("overlaps the %s %s (similarity %.2f in %.2f–%.2f)", what, o.ID, sim, th.Conflict, th.Duplicate)
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b rulefmt.ConflictReport) int {
		switch {
		case a.Similarity > b.Similarity:
			return -1
		case a.Similarity < b.Similarity:
			return 1
		}
		return 0
	})
	return out
}

func sharedAgent(a, b []string) (string, bool) {
	for _, x := range a {
		if slices.Contains(b, x) {
			return x, true
		}
	}
	return "", false
}

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }

// polarity is +1 for text that prescribes, -1 for text that forbids,
// 0 otherwise (english.Polarity).
var polarity = english.Polarity

// vectorCache embeds rule texts through an embedding.Cache: rule texts
// are few and compared often.
type vectorCache struct{ c *embedding.Cache }

// maxCachedVectors bounds the cache.
const maxCachedVectors = 50000

func newVectorCache(e embedding.Embedder) *vectorCache {
	return &vectorCache{embedding.NewCache(e, maxCachedVectors)}
}

// vectors returns one vector per text, embedding only the texts it has
// not seen.
func (c *vectorCache) vectors(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := c.c.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed rule texts: %w", err)
	}
	return vecs, nil
}
