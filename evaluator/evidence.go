package evaluator

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// evidenceComments is how many central comments evidence carries.
const evidenceComments = 5

// Evidence returns every generalizable cluster, by id, as evidence for a
// rule, or with ids those of them that are generalizable. A cluster's
// evidence is made again only when a write touched it since it was last
// made (evidenceCache.read); a cluster not asked for before is read with
// all its members. Ranking comments reads the vectors of the members
// already read (and, for a cluster changed since it was last ranked, its
// central evaluation).
func (s *Service) Evidence(ctx context.Context, ids ...string) ([]rulefmt.Evidence, error) {
	if len(ids) == 0 {
		ids = nil
	}
	evs, err := s.evidence.read(ctx, s.state, s.opts.Lessons.Classifier().Taxonomy(), s.evidenceFrom, ids)
	if err != nil && len(ids) > 0 {
		return nil, fmt.Errorf("read clusters %s: %w", strings.Join(ids, ", "), err)
	}
	return evs, err
}

// GeneralizableClusters lists s's generalizable clusters by id with
// their class and size, from the clusters held in memory: the proposer
// reads the evidence of only those it may draft (rulefmt.ClusterLister).
func GeneralizableClusters(s *Service) []rulefmt.ClusterRef {
	s.groups.mu.RLock()
	defer s.groups.mu.RUnlock()
	var out []rulefmt.ClusterRef
	for id, c := range s.groups.byID {
		if v := c.listed; v != nil && v.Class.Generalizable() {
			out = append(out, rulefmt.ClusterRef{ID: id, Class: string(v.Class), Size: v.Size})
		}
	}
	slices.SortFunc(out, func(a, b rulefmt.ClusterRef) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// evidenceFrom ranks a cluster's comments, reading the vectors of the
// members already read, and makes its evidence.
func (s *Service) evidenceFrom(ctx context.Context, r clusterMembers) (rulefmt.Evidence, error) {
	var sample []Member
	if r.sample < len(r.members) {
		sample = r.members[r.sample:]
	}
	v, err := s.view(ctx, viewOf(r.cluster), evidenceComments, sample)
	if err != nil {
		return rulefmt.Evidence{}, err
	}
	return evidenceOf(v, r.members, s.opts.Lessons.Classifier().Taxonomy()), nil
}

// evidenceOf is a cluster's view and members as rule evidence
// (rulefmt.Evidence, what the rule proposer drafts from): its tags
// lower-case, its lesson from the taxonomy, and what its reviewers asked
// ordered by how central their comments are.
func evidenceOf(v ClusterView, members []Member, taxonomy *lesson.Taxonomy) rulefmt.Evidence {
	e := rulefmt.Evidence{
		ClusterID: v.ID, Class: string(v.Class), Agents: v.Stats.Agents, Size: v.Stats.Size,
		Reviewers: slices.Sorted(maps.Keys(v.Reviewers)), Epics: slices.Sorted(maps.Keys(v.Epics)), Producers: v.Stats.Producers,
		FirstSeen: v.Stats.FirstSeen, LastSeen: v.Stats.LastSeen, Confidence: v.Confidence,
	}
	for _, r := range v.Representatives {
		e.Comments = append(e.Comments, rulefmt.Comment(r))
	}
	for _, m := range members {
		e.FeedbackIDs = append(e.FeedbackIDs, m.DecisionID)
	}
	for _, t := range v.Tags {
		e.Tags = append(e.Tags, strings.ToLower(t))
	}
	cat, ok := taxonomy.Category(v.Category)
	if !ok {
		return e
	}
	e.Category, e.CategoryRule, e.Protected = cat.ID, cat.Rule, cat.Protected
	// What the reviewers asked, the most central first.
	central := map[string]int{}
	for i, r := range v.Representatives {
		central[r.DecisionID] = i + 1
	}
	ordered := slices.Clone(members)
	slices.SortStableFunc(ordered, func(a, b Member) int {
		ra, rb := central[a.DecisionID], central[b.DecisionID]
		switch {
		case ra > 0 && rb > 0:
			return ra - rb
		case ra > 0:
			return -1
		case rb > 0:
			return 1
		}
		return 0
	})
	for _, m := range ordered {
		if m.Asked != "" {
			e.Asked = append(e.Asked, m.Asked)
			e.AskedBy = append(e.AskedBy, m.DecisionID)
		}
	}
	return e
}

// clusterMembers is a cluster with all its members in join order;
// members[sample:] are those whose comments view ranks.
type clusterMembers struct {
	cluster Cluster
	members []Member
	sample  int
	// lastSeq is the largest join number among the members.
	lastSeq uint64
}

// withMembers reads the members of c with the members cursor mc.
func withMembers(mc *bolt.Cursor, c Cluster, sampleSize int) (clusterMembers, error) {
	r := clusterMembers{cluster: c, sample: -1}
	from := uint64(max(c.Size-sampleSize+1, 1))
	prefix := append([]byte(c.ID), 0)
	for k, mv := mc.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, mv = mc.Next() {
		var m Member
		if err := json.Unmarshal(mv, &m); err != nil {
			return clusterMembers{}, err
		}
		seq := binary.BigEndian.Uint64(k[len(prefix):])
		if r.sample < 0 && seq >= from {
			r.sample = len(r.members)
		}
		r.lastSeq = max(r.lastSeq, seq)
		r.members = append(r.members, m)
	}
	if r.sample < 0 {
		r.sample = len(r.members)
	}
	return r, nil
}
