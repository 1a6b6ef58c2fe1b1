package evaluator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Suggestion is a pair of clusters that read like one problem: a curator
// may merge them or keep them apart.
type Suggestion struct {
	A, B       string
	Agent      string
	Categories [2]string
	// Similarity is the mean similarity between their members.
	Similarity float64
	Why        string
}

// Suggestions for merges: within a group, clusters whose members are
// close to the linkage threshold but under it; across categories of one
// agent, clusters whose members are as similar as a cluster's own.
const (
	suggestMargin = 0.1
	// suggestAcross is the least mean similarity at which clusters of
	// different categories are suggested: their lessons disagree, so
	// their words must agree clearly.
	suggestAcross = 0.7
	// maxSuggestClusters bounds the clusters compared per agent (the
	// largest first), so the comparison stays quadratic in a constant.
	maxSuggestClusters = 500
	// maxSuggestions bounds the candidates kept while comparing.
	maxSuggestions = 1000
)

// SuggestMerges returns up to limit pairs of clusters of one agent that
// read like one problem, most similar first, leaving out pairs a curator
// kept apart.
func (s *Service) SuggestMerges(ctx context.Context, limit int) ([]Suggestion, error) {
	k, err := loadConstraints(s.state)
	if err != nil {
		return nil, err
	}
	members := func(id string) ([]string, error) {
		ms, err := s.state.members(id, 1)
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.DecisionID
		}
		return ids, err
	}
	type unit struct {
		id string
		centroid
	}
	byAgent := map[string][]unit{}
	s.groups.mu.RLock()
	for id, ce := range s.groups.byID {
		agent := agentOf(ce.group)
		byAgent[agent] = append(byAgent[agent], unit{id, ce})
	}
	s.groups.mu.RUnlock()
	var out []Suggestion
	for _, agent := range slices.Sorted(maps.Keys(byAgent)) {
		us := byAgent[agent]
		slices.SortFunc(us, func(a, b unit) int {
			if a.size != b.size {
				return b.size - a.size
			}
			return strings.Compare(a.id, b.id)
		})
		us = us[:min(len(us), maxSuggestClusters)]
		for i := range us {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for j := i + 1; j < len(us); j++ {
				a, b := us[i], us[j]
				sim := dot(a.sum, b.sum) / float64(a.size*b.size)
				same := a.group == b.group
				if same {
					// Within a group a pass merges by the family
					// similarity (families.go).
					sim -= categoryWeight * (1 - dotWeights(a.catSum, b.catSum)/float64(a.size*b.size))
				}
				if (same && sim < s.opts.LinkageThreshold-suggestMargin) || (!same && sim < max(s.opts.LinkageThreshold, suggestAcross)) {
					continue
				}
				first, second := a, b
				if b.id < a.id {
					first, second = b, a
				}
				why := fmt.Sprintf("their members are %.2f similar on average, just under the %.2f a re-clustering pass merges at", sim, s.opts.LinkageThreshold)
				if !same {
					why = fmt.Sprintf("their members are %.2f similar on average, as close as one cluster's, but their lessons' categories are not neighbours (%s, %s)", sim, first.category, second.category)
				}
				out = append(out, Suggestion{A: first.id, B: second.id, Agent: agent, Categories: [2]string{first.category, second.category}, Similarity: round2(sim), Why: why})
			}
		}
		// Keep the most similar candidates only, so memory stays bounded
		// whatever the clusters look like.
		sortSuggestions(out)
		out = out[:min(len(out), maxSuggestions)]
	}
	sortSuggestions(out)
	var kept []Suggestion
	for _, sg := range out {
		if limit > 0 && len(kept) == limit {
			break
		}
		ma, err := members(sg.A)
		if err != nil {
			return nil, err
		}
		mb, err := members(sg.B)
		if err != nil {
			return nil, err
		}
		if !k.keptApart(ma, mb) {
			kept = append(kept, sg)
		}
	}
	return kept, nil
}

func sortSuggestions(out []Suggestion) {
	slices.SortFunc(out, func(a, b Suggestion) int {
		if a.Similarity != b.Similarity {
			if a.Similarity > b.Similarity {
				return -1
			}
			return 1
		}
		return strings.Compare(a.A+a.B, b.A+b.B)
	})
}
