// Package effect closes the learning loop: it ties each decision to the
// rules that were in its agent's prompt, measures per rule whether the
// failure pattern it targets recurs less than before, and acts on the
// evidence — importance, confidence, sunset proposals, re-approval
// requests, shadow comparisons (docs/effects.md).
package effect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lib/intern"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Feed is the feedback store the tracker follows.
type Feed interface {
	Since(seq uint64, limit int) ([]feedbackstore.Record, error)
	Changed() <-chan struct{}
}

// Evaluations gives each negative decision's cluster and lesson category
// (ok false while it has no evaluation), and each cluster's category.
type Evaluations interface {
	Placement(ctx context.Context, id string) (cluster, category string, ok bool, err error)
	Cluster(ctx context.Context, id string) (evaluator.ClusterView, error)
}

// Versions says which rules a prompt version held.
type Versions interface {
	Lookup(ctx context.Context, version string) (prompts.VersionRecord, bool, error)
}

// Rules is what the loop reads of approved rules and does to them:
// rules.Upkeep (docs/effects.md, "Lifecycle from evidence").
type Rules interface {
	ActiveRules(ctx context.Context, agent string) ([]rulefmt.Rule, error)
	Rule(ctx context.Context, id string) (rulefmt.Rule, []rulefmt.HistoryEntry, error)
	Propose(ctx context.Context, req rulefmt.LifecycleRequest) (rulefmt.Proposal, bool, error)
	OpenProposal(ctx context.Context, ruleID string) (rulefmt.Proposal, bool, error)
	DecidedProposals(ctx context.Context, ruleID string, kind rulefmt.Kind) ([]rulefmt.Proposal, error)
	ShadowIdle(ctx context.Context, ruleID, proposalID, why string) error
	Withdraw(ctx context.Context, proposalID, reason string) error
	RecordEffects(ctx context.Context, updates []rulefmt.EffectUpdate) (int, error)
}

// Metrics receives each effects pass's figures; internal/metrics turns them into
// gauges per rule.
type Metrics interface {
	RuleEffects(effects []Effect)
}

// fact is what the tracker keeps of one decision: enough to attribute it
// and count it, nothing a person wrote. A store of a million decisions
// holds a million facts, so a fact is 56 bytes with one pointer (its id):
// the decision's time as seconds and nanoseconds, its verdict as a
// number, and its prompt version, gate, reviewer, epic and producer as
// numbers in the tracker's names. As strings and a time.Time it was 136
// bytes and seven pointers for the collector to follow.
type fact struct {
	id                                      string
	sec                                     int64
	nsec                                    int32
	verdict                                 verdictCode
	version, gate, reviewer, epic, producer name
}

// name numbers a string in a tracker's names; 0 is "".
type name uint32

// verdictCode numbers a verdict.
type verdictCode uint8

// verdictOf are the verdicts by code; an unknown verdict keeps code 0.
var verdictOf = []precept.Verdict{"", precept.Approved, precept.Rejected, precept.ApprovedWithChanges}

func codeOf(v precept.Verdict) verdictCode {
	for i, w := range verdictOf {
		if w == v {
			return verdictCode(i)
		}
	}
	return 0
}

func (f fact) time() time.Time { return time.Unix(f.sec, int64(f.nsec)).UTC() }

func (f fact) decision() precept.Verdict { return verdictOf[f.verdict] }

// Tracker follows the feedback store and computes rule effects on demand
// and every Options.Interval, when it also records them and acts on them.
type Tracker struct {
	feed     Feed
	evals    Evaluations
	versions Versions
	rules    Rules
	opts     Options
	log      *slog.Logger

	mu      sync.Mutex
	seq     uint64
	byAgent map[string][]fact
	// sortedLen is how many of an agent's facts, from the first, are in
	// time order; facts read since are appended after them.
	sortedLen map[string]int
	// names are the strings facts number (name). Facts only refer to
	// names added before them, and a name never changes, so a reader
	// holding names.Strings() taken with the facts reads it
	// without the lock.
	names intern.Table

	// placements caches each evaluated negative decision's cluster and
	// category between effects passes; Pass clears it, so a pass sees
	// every re-clustering and correction, and reports between passes
	// reuse it.
	placements placementCache
	memo       effectMemo
}

// New returns a tracker; Run follows the feed.
func New(feed Feed, evals Evaluations, versions Versions, rs Rules, opts Options) *Tracker {
	opts = opts.withDefaults()
	return &Tracker{
		feed: feed, evals: evals, versions: versions, rules: rs, opts: opts, log: opts.Logger,
		byAgent: map[string][]fact{}, sortedLen: map[string]int{},
	}
}

// number returns s's number in t.names, adding it; t.mu is held.
func (t *Tracker) number(s string) name { return name(t.names.Of(s)) }

// CatchUp reads the decisions stored since the last call.
func (t *Tracker) CatchUp(ctx context.Context) (int, error) {
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		t.mu.Lock()
		seq := t.seq
		t.mu.Unlock()
		recs, err := t.feed.Since(seq, 1000)
		if err != nil {
			return n, fmt.Errorf("effects: read decisions: %w", err)
		}
		if len(recs) == 0 {
			return n, nil
		}
		t.mu.Lock()
		for _, r := range recs {
			d := r.Decision
			t.byAgent[d.Agent] = append(t.byAgent[d.Agent], fact{
				id: d.DecisionID, sec: d.Timestamp.Unix(), nsec: int32(d.Timestamp.Nanosecond()), verdict: codeOf(d.Decision),
				version: t.number(d.PromptVersion), gate: t.number(d.GateID),
				reviewer: t.number(d.ReviewerID), epic: t.number(d.EpicID), producer: t.number(r.ProducerName()),
			})
			t.seq = max(t.seq, r.Seq)
		}
		t.mu.Unlock()
		n += len(recs)
	}
}

// facts returns an agent's decisions in time order (decision timestamp,
// then id), and the names they number. The slices are shared: callers
// only read them.
//
// Only the facts read since the last call are sorted: they lie past
// every slice handed out, so they are sorted in place, and when they
// all come after the sorted ones (decisions arrive roughly in time
// order) nothing else moves. Otherwise the two runs are merged into a
// new slice, leaving the one readers hold as it was: linear in the
// agent's decisions, where sorting them all again was not.
func (t *Tracker) facts(agent string) ([]fact, []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.byAgent[agent]
	k := t.sortedLen[agent]
	if k < len(fs) {
		tail := fs[k:]
		slices.SortStableFunc(tail, compareFacts)
		if k > 0 && compareFacts(fs[k-1], tail[0]) > 0 {
			merged := make([]fact, 0, len(fs)+len(fs)/8)
			head := fs[:k]
			for len(head) > 0 && len(tail) > 0 {
				// Ties keep the earlier run first, as a stable sort of
				// the whole would.
				if compareFacts(tail[0], head[0]) < 0 {
					merged, tail = append(merged, tail[0]), tail[1:]
				} else {
					merged, head = append(merged, head[0]), head[1:]
				}
			}
			fs = append(append(merged, head...), tail...)
			t.byAgent[agent] = fs
		}
		t.sortedLen[agent] = len(fs)
	}
	return fs[:len(fs):len(fs)], t.names.Strings()
}

// compareFacts orders facts by decision timestamp, then id.
func compareFacts(a, b fact) int {
	return cmp.Or(cmp.Compare(a.sec, b.sec), cmp.Compare(a.nsec, b.nsec), cmp.Compare(a.id, b.id))
}

// Run follows the feed and runs an effects pass every Options.Interval until ctx
// is done.
func (t *Tracker) Run(ctx context.Context) error {
	if _, err := t.CatchUp(ctx); err != nil && ctx.Err() == nil {
		t.log.Warn("effects: catch up", "err", err)
	}
	pass := time.NewTicker(t.opts.Interval)
	defer pass.Stop()
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		changed := t.feed.Changed()
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-poll.C:
		case <-pass.C:
			if _, err := t.CatchUp(ctx); err != nil && ctx.Err() == nil {
				t.log.Warn("effects: catch up", "err", err)
			}
			if _, err := t.Pass(ctx); err != nil && ctx.Err() == nil {
				t.log.Warn("effects pass", "err", err)
			}
			continue
		}
		if _, err := t.CatchUp(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("effects: catch up", "err", err)
		}
	}
}

// pattern is what counts as a recurrence of a rule's failure: a negative
// decision of one of its agents in its source cluster (or a cluster whose
// evidence it absorbed) or in its lesson category.
type pattern struct {
	clusters map[string]bool
	category string
}

func (p pattern) empty() bool { return len(p.clusters) == 0 && p.category == "" }

// computation shares lookups between the rules of one report.
type computation struct {
	t *Tracker
	// versions caches version lookups, found or not: a version nobody
	// recorded costs one lookup per report, not one per decision.
	versions map[string]*prompts.VersionRecord
	// categories caches each cluster's category.
	categories map[string]string
	now        time.Time
}

func (t *Tracker) newComputation() *computation {
	return &computation{t: t, categories: map[string]string{}, versions: map[string]*prompts.VersionRecord{}, now: t.opts.Now().UTC()}
}

// version returns a recorded prompt version, nil when it is unknown.
func (c *computation) version(ctx context.Context, v string) (*prompts.VersionRecord, error) {
	if rec, ok := c.versions[v]; ok {
		return rec, nil
	}
	rec, ok, err := c.t.versions.Lookup(ctx, v)
	if err != nil {
		return nil, err
	}
	var out *prompts.VersionRecord
	if ok {
		out = &rec
	}
	c.versions[v] = out
	return out, nil
}

// placement returns a decision's cluster and lesson category, "" for
// what the evaluator has not (yet) given it.
func (c *computation) placement(ctx context.Context, id string) ([2]string, error) {
	if c.t.evals == nil {
		return [2]string{}, nil
	}
	if p, ok := c.t.placements.get(id); ok {
		return p, nil
	}
	cluster, category, found, err := c.t.evals.Placement(ctx, id)
	if err != nil {
		return [2]string{}, err
	}
	if !found {
		// Not evaluated yet: no pattern now, asked again next time.
		return [2]string{}, nil
	}
	p := [2]string{cluster, category}
	c.t.placements.put(id, p)
	return p, nil
}

func (c *computation) clusterCategory(ctx context.Context, id string) (string, error) {
	if cat, ok := c.categories[id]; ok || c.t.evals == nil {
		return cat, nil
	}
	v, err := c.t.evals.Cluster(ctx, id)
	if precept.ErrorCode(err) == precept.NotFound {
		c.categories[id] = ""
		return "", nil
	}
	if err != nil {
		return "", err
	}
	c.categories[id] = v.Category
	return v.Category, nil
}

func (c *computation) patternOf(ctx context.Context, r rulefmt.Rule) (pattern, error) {
	p := pattern{clusters: map[string]bool{}}
	for _, id := range append([]string{r.ClusterID}, r.EvidenceClusters...) {
		if id == "" {
			continue
		}
		p.clusters[id] = true
		if p.category == "" {
			cat, err := c.clusterCategory(ctx, id)
			if err != nil {
				return pattern{}, err
			}
			p.category = cat
		}
	}
	if p.category == "" && r.Effect != nil {
		// The source cluster is gone (merged away in re-clustering): the category
		// recorded with the last figures still names the pattern.
		p.category = r.Effect.Category
	}
	return p, nil
}

// recurs reports whether a decision is a recurrence of the pattern.
func (c *computation) recurs(ctx context.Context, f fact, p pattern) (bool, error) {
	if !f.decision().Negative() || p.empty() {
		return false, nil
	}
	pl, err := c.placement(ctx, f.id)
	if err != nil {
		return false, err
	}
	return pl[0] != "" && p.clusters[pl[0]] || pl[1] != "" && pl[1] == p.category, nil
}

// errNoRule is returned for rule ids the rules repository does not know.
var errNoRule = errors.New("no such rule")
