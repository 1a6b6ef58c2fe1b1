package impact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Proposals lists proposals; rules.Manager implements it.
type Proposals interface {
	List(ctx context.Context, f rules.ListFilter) ([]rulefmt.Proposal, error)
}

var _ Proposals = (*rules.Manager)(nil)

// Sources are what previews are computed from. All are required.
type Sources struct {
	Proposals   Proposals
	Feedback    Feedback
	Evaluations Evaluations
	Lessons     Lessons
	Documents   Documents
	// Embedder compares the rule with the guidance on main; the rule
	// manager's own, so the bands of Thresholds mean the same.
	Embedder embedding.Embedder
}

// The rhythm of previews (docs/thresholds.md, "Impact preview").
const (
	// DefaultInterval is how often pending proposals' previews are
	// looked at.
	DefaultInterval = time.Minute
	// DefaultRefresh is how old a preview of the same text gets before
	// it is counted again because decisions arrived, main moved or it
	// saw decisions not evaluated yet: each count reads the placements
	// of the agents' negative decisions (incremental.go).
	DefaultRefresh = 10 * time.Minute
)

// Options configure a Service; zero values mean the defaults.
type Options struct {
	// Model replays the rule as a checker; nil turns the replay off.
	Model Model
	// MaxCalls caps a replay's LLM calls; default DefaultMaxCalls.
	MaxCalls int
	// ApprovalSample caps the approved outputs a replay samples; default
	// DefaultApprovalSample.
	ApprovalSample int
	// CallTimeout bounds each LLM call; default DefaultCallTimeout.
	CallTimeout time.Duration
	// Thresholds are the similarity bands; default rules.DefaultThresholds.
	Thresholds rules.Thresholds
	// Interval between rounds; default DefaultInterval.
	Interval time.Duration
	// Refresh is how old a preview of the same text gets before new
	// decisions or a new main are counted; default DefaultRefresh.
	Refresh time.Duration
	// Dir keeps one file per proposal with its latest preview, replay
	// included, so a restart does not pay for a replay again
	// (docs/formats.md, "Impact previews"); "" keeps them in memory only.
	Dir string
	// Denylist adds phrases to the text-safety denylist for what is sent
	// to the LLM.
	Denylist []string
	Now      func() time.Time
	Logger   *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	if o.ApprovalSample <= 0 {
		o.ApprovalSample = DefaultApprovalSample
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Thresholds == (rules.Thresholds{}) {
		o.Thresholds = rules.DefaultThresholds()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Service computes impact previews in the background and answers with
// the latest one at once. Its methods are safe for concurrent use.
type Service struct {
	src  Sources
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	previews map[string]Preview
	hooks    []func(proposalID string)

	wake chan struct{}
	// computeMu serialises computations: rounds and Compute calls; it
	// guards the call budget too.
	computeMu sync.Mutex
	budget    callBudget
	// vectors embeds the rule and the guidance on main, remembering
	// their vectors by their text.
	vectors *embedding.Cache
	// counter keeps the ledger counts read, to extend with the
	// decisions stored since (incremental.go).
	counter counter
}

// callBudget counts the replay calls of the current window.
type callBudget struct {
	limit int
	start time.Time
	used  int
}

// reserve takes n calls from the window at now, or reports when the
// window that can give them starts.
func (b *callBudget) reserve(n int, now time.Time) (ok bool, retryAt time.Time) {
	if now.Sub(b.start) >= replayBudgetWindow {
		b.start, b.used = now, 0
	}
	if b.used+n > b.limit {
		return false, b.start.Add(replayBudgetWindow)
	}
	b.used += n
	return true, time.Time{}
}

// New returns a Service, with the previews kept in opts.Dir loaded.
func New(src Sources, opts Options) (*Service, error) {
	if src.Proposals == nil || src.Feedback == nil || src.Evaluations == nil || src.Lessons == nil || src.Documents == nil || src.Embedder == nil {
		return nil, errors.New("impact: every source is required")
	}
	opts = opts.withDefaults()
	s := &Service{src: src, opts: opts, log: opts.Logger, previews: map[string]Preview{}, wake: make(chan struct{}, 1),
		budget: callBudget{limit: max(replayBudget, opts.MaxCalls)}, vectors: embedding.NewCache(src.Embedder, maxCachedPassages)}
	if opts.Dir != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// OnUpdate registers fn to be called with a proposal's id whenever its
// preview changes. Register before Run.
func (s *Service) OnUpdate(fn func(proposalID string)) {
	s.mu.Lock()
	s.hooks = append(s.hooks, fn)
	s.mu.Unlock()
}

// Preview returns the latest preview of p without computing anything. A
// pending proposal with no preview of its current text gets one marked
// Pending, and a round is asked for. Memory holds the previews of
// pending proposals only: a decided proposal's last preview is read from
// its file in Dir; ok is false when there is none.
func (s *Service) Preview(p rulefmt.Proposal) (Preview, bool) {
	s.mu.Lock()
	pv, ok := s.previews[p.ID]
	s.mu.Unlock()
	if !ok && p.Status != rulefmt.Pending && s.opts.Dir != "" {
		pv, ok = s.read(p.ID)
	}
	if ok && pv.ContentRevision == p.ContentRevision {
		return pv.clone(), true
	}
	if p.Status != rulefmt.Pending {
		return Preview{}, false
	}
	s.Request()
	return Preview{Pending: true, ProposalID: p.ID, ContentRevision: p.ContentRevision}, true
}

// Summary is the preview of p in one line (Preview.Summary), "" when
// there is none.
func (s *Service) Summary(p rulefmt.Proposal) string {
	pv, ok := s.Preview(p)
	if !ok {
		return ""
	}
	return pv.Summary()
}

// Request asks for a round soon; it never blocks.
func (s *Service) Request() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// ProposalChanged is the rule manager's change hook: a changed proposal
// is previewed again soon.
func (s *Service) ProposalChanged(c rulefmt.Change) {
	if c.ProposalID != "" {
		s.Request()
	}
}

// Run brings the pending proposals' previews up to date at start, every
// Interval and when asked, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		if err := s.Round(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("impact previews; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		}
	}
}

// Round previews every pending proposal whose preview is missing or
// behind its text, the feedback store or main, and runs the replays
// still owed.
func (s *Service) Round(ctx context.Context) error {
	list, err := s.src.Proposals.List(ctx, rules.ListFilter{Status: rulefmt.Pending})
	if err != nil {
		return fmt.Errorf("list pending proposals: %w", err)
	}
	s.forgetDecided(list)
	pre, err := s.countDue(ctx, list)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Each preview is counted on its own instead.
		s.log.Warn("impact previews: one scan for all", "err", err)
	}
	var errs []error
	for _, p := range list {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c := pre[p.ID]
		delete(pre, p.ID) // its outputs go once used
		if _, err := s.compute(ctx, p, false, c); err != nil {
			errs = append(errs, fmt.Errorf("proposal %s: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

// forgetDecided drops from memory the previews of proposals that are not
// in pending, the pending ones: decided proposals are not previewed
// again, and their files in Dir keep their last preview.
func (s *Service) forgetDecided(pending []rulefmt.Proposal) {
	s.computeMu.Lock()
	defer s.computeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.previews {
		if !slices.ContainsFunc(pending, func(p rulefmt.Proposal) bool { return p.ID == id }) {
			delete(s.previews, id)
		}
	}
}

// Compute brings p's preview up to date and returns it: the counts and
// the comparison with main when the proposal's text changed, or when the
// feedback store or main moved and the preview is older than Refresh;
// then the replay when this text has none yet. It may call the LLM:
// callers that answer requests use Preview instead.
func (s *Service) Compute(ctx context.Context, p rulefmt.Proposal) (Preview, error) {
	return s.compute(ctx, p, false, nil)
}

// Refresh is Compute counting again whatever the preview's age, even
// when nothing moved; a replay already done is kept.
func (s *Service) Refresh(ctx context.Context, p rulefmt.Proposal) (Preview, error) {
	return s.compute(ctx, p, true, nil)
}

// compute brings p's preview up to date; pre, when not nil, is p's
// counts from a scan shared with other previews (countDue), used when
// the preview is due.
func (s *Service) compute(ctx context.Context, p rulefmt.Proposal, force bool, pre *counted) (Preview, error) {
	s.computeMu.Lock()
	defer s.computeMu.Unlock()
	if len(p.Agents) == 0 {
		return Preview{}, errNoAgents
	}
	pos, err := s.position()
	if err != nil {
		return Preview{}, err
	}
	commit, docs := s.src.Documents.Documents()
	prev, sameText, due := s.due(p, force, pos.seq, commit)
	if !due {
		return prev.clone(), nil
	}
	now := s.opts.Now()
	var pv Preview
	var tl tally
	if pre != nil && pre.pv.ContentRevision == p.ContentRevision && (!sameText || pre.pv.FeedbackSeq >= prev.FeedbackSeq) {
		pv, tl = pre.pv, pre.tl
	} else if pv, tl, err = s.count(ctx, p, pos, s.replayReads(prev, sameText)); err != nil {
		return Preview{}, err
	}
	pv.MainCommit = commit
	if pv.Similar, pv.SimilarLeftOut, err = similar(ctx, s.vectors, s.opts.Thresholds, p, docs); err != nil {
		return Preview{}, err
	}
	switch {
	case sameText && prev.Replay.State == ReplayDone:
		// A replay is paid once per text (docs/lifecycle.md, "Impact
		// preview").
		pv.Replay = prev.Replay
	case s.opts.Model == nil:
		pv.Replay = Replay{State: ReplayOff}
	case sameText && prev.Replay.State == ReplayPending:
		// Failed attempts and the time of the next one carry over.
		pv.Replay = Replay{State: ReplayPending, Model: s.opts.Model.Model(), Attempts: prev.Replay.Attempts, RetryAt: prev.Replay.RetryAt}
	default:
		pv.Replay = Replay{State: ReplayPending, Model: s.opts.Model.Model()}
	}
	if pv.Replay.State != ReplayPending || now.Before(pv.Replay.RetryAt) {
		s.publish(pv)
		return pv.clone(), nil
	}
	planned := min(len(tl.evidence)+len(tl.approvals), s.opts.MaxCalls)
	if ok, retryAt := s.budget.reserve(planned, now); !ok {
		pv.Replay.RetryAt = retryAt.UTC()
		s.publish(pv)
		return pv.clone(), nil
	}
	s.publish(pv)
	r := replayer{model: s.opts.Model, timeout: s.opts.CallTimeout, maxCalls: s.opts.MaxCalls, denylist: s.opts.Denylist}
	rep, err := r.run(ctx, p.Content, strings.Join(p.Agents, ", "), tl.outputs())
	if err != nil {
		return pv.clone(), fmt.Errorf("replay: %w", err)
	}
	s.budget.used -= planned - rep.Calls
	rep.Attempts = pv.Replay.Attempts + 1
	if rep.failed() && rep.Attempts < maxReplayAttempts {
		// The LLM is down, most likely: no figures, try again later.
		s.log.Warn("impact replay failed; will retry", "proposal_id", p.ID, "attempt", rep.Attempts,
			"calls", rep.Calls, "errors", rep.Errors, "timeouts", rep.Timeouts)
		rep = Replay{State: ReplayPending, Model: rep.Model, Attempts: rep.Attempts, RetryAt: now.Add(retryWait(rep.Attempts)).UTC()}
	}
	pv.Replay = rep
	s.publish(pv)
	return pv.clone(), nil
}

// due reports whether p's preview is to be counted again: forced, its
// text changed, or the feedback store or main moved (or it saw decisions
// not evaluated yet) and it is older than Refresh, or its replay is due.
// It returns the preview kept and whether it is of p's text.
func (s *Service) due(p rulefmt.Proposal, force bool, seq uint64, commit string) (prev Preview, sameText, due bool) {
	s.mu.Lock()
	prev, had := s.previews[p.ID]
	s.mu.Unlock()
	sameText = had && prev.ContentRevision == p.ContentRevision
	// Evaluations change without the feedback store moving (the
	// evaluator catching up, reclustering, corrections): a preview that
	// saw decisions not evaluated yet is never current.
	current := prev.FeedbackSeq == seq && prev.MainCommit == commit && prev.Unevaluated == 0
	now := s.opts.Now()
	fresh := now.Sub(prev.ComputedAt) < s.opts.Refresh
	replayDue := prev.Replay.State == ReplayPending && !now.Before(prev.Replay.RetryAt)
	return prev, sameText, force || !sameText || !(current || fresh) || replayDue
}

// counted is a preview's counts from a scan shared with other previews.
type counted struct {
	pv Preview
	tl tally
}

// countDue counts, in one scan of the feedback store, every preview of
// list that is due: a round reads the store once, not once per pending
// proposal. A proposal whose target cannot be worked out is left out,
// for compute to report.
func (s *Service) countDue(ctx context.Context, list []rulefmt.Proposal) (map[string]*counted, error) {
	// The category memo is computeMu's, and a Refresh meanwhile would
	// count the same previews again.
	s.computeMu.Lock()
	defer s.computeMu.Unlock()
	pos, err := s.position()
	if err != nil {
		return nil, err
	}
	commit, _ := s.src.Documents.Documents()
	var ps []rulefmt.Proposal
	var ts []target
	var extra []targetExtra
	cls := s.src.Lessons.Classifier()
	for _, p := range list {
		prev, sameText, due := s.due(p, false, pos.seq, commit)
		if !due || len(p.Agents) == 0 {
			continue
		}
		t, x, err := s.target(ctx, cls, p, s.replayReads(prev, sameText))
		if err != nil {
			continue
		}
		ps, ts, extra = append(ps, p), append(ts, t), append(extra, x)
	}
	if len(ts) < 2 {
		return nil, nil // compute counts one alone
	}
	tls, err := s.counter.scan(ctx, s.src.Feedback, s.src.Evaluations, cls, ts, pos)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*counted, len(ps))
	for k, p := range ps {
		out[p.ID] = &counted{pv: s.finish(p, ts[k], extra[k], tls[k], pos.seq), tl: tls[k]}
	}
	return out, nil
}

// targetExtra is what finishing a preview needs besides its target: the
// clauses its text adds beyond the evidence, worked out before the scan
// so the evidence decisions are not kept through it.
type targetExtra struct {
	added []string
}

// target works out what a scan for p looks for, with classifier cls,
// and whether it keeps outputs for a replay.
func (s *Service) target(ctx context.Context, cls *lesson.Classifier, p rulefmt.Proposal, outputs bool) (target, targetExtra, error) {
	cat, err := category(ctx, s.src.Evaluations, cls, p)
	if err != nil {
		return target{}, targetExtra{}, err
	}
	evidence, err := readEvidence(ctx, s.src.Feedback, p.FeedbackIDs)
	if err != nil {
		return target{}, targetExtra{}, err
	}
	t := target{proposalID: p.ID, agents: p.Agents, category: cat, scope: scopeOf(p.Agents, evidence),
		evidence: map[string]bool{}}
	if outputs {
		t.sample, t.maxOutputs = s.opts.ApprovalSample, s.opts.MaxCalls
	}
	if p.ClusterID != "" {
		t.clusters = append(t.clusters, p.ClusterID)
	}
	t.clusters = append(t.clusters, p.EvidenceClusters...)
	for _, id := range p.FeedbackIDs {
		t.evidence[id] = true
	}
	var x targetExtra
	if p.Kind == rulefmt.KindNewRule || p.Kind == "" {
		// A consolidation carries approved rules' text besides the new
		// guidance: that text was approved on its own evidence.
		x.added = added(p.Content, evidence, p.Clauses, p.ContentRevision > 1)
	}
	return t, x, nil
}

// position is where the feedback store stands.
func (s *Service) position() (position, error) {
	p, err := s.src.Feedback.Position()
	if err != nil {
		return position{}, fmt.Errorf("feedback position: %w", err)
	}
	return position{seq: p.Seq, count: p.Count, generation: p.Generation}, nil
}

// replayReads reports whether a replay will read the outputs a count
// finds, given the preview kept and whether it is of the same text: not
// without a model, nor once the text's replay is done. Counts that no
// replay reads keep no output, between counts either.
func (s *Service) replayReads(prev Preview, sameText bool) bool {
	return s.opts.Model != nil && !(sameText && prev.Replay.State == ReplayDone)
}

// count counts p's preview alone, keeping the outputs a replay reads
// when outputs is true.
func (s *Service) count(ctx context.Context, p rulefmt.Proposal, pos position, outputs bool) (Preview, tally, error) {
	cls := s.src.Lessons.Classifier()
	t, x, err := s.target(ctx, cls, p, outputs)
	if err != nil {
		return Preview{}, tally{}, err
	}
	tls, err := s.counter.scan(ctx, s.src.Feedback, s.src.Evaluations, cls, []target{t}, pos)
	if err != nil {
		return Preview{}, tally{}, err
	}
	return s.finish(p, t, x, tls[0], pos.seq), tls[0], nil
}

// finish turns a scan's tally for p into its preview.
func (s *Service) finish(p rulefmt.Proposal, t target, x targetExtra, tl tally, seq uint64) Preview {
	pv := tl.preview
	for _, c := range []*Counts{&pv.Cluster, &pv.CategoryNegatives, &pv.OverCorrect} {
		c.capEpics()
	}
	pv.ProposalID, pv.ContentRevision, pv.Category, pv.Scope = p.ID, p.ContentRevision, t.category, t.scope
	pv.Added = x.added
	pv.FeedbackSeq, pv.ComputedAt = seq, s.opts.Now().UTC()
	return pv
}

// publish keeps pv as p's latest preview, on disk too, and tells the
// hooks.
func (s *Service) publish(pv Preview) {
	s.mu.Lock()
	s.previews[pv.ProposalID] = pv.clone()
	hooks := slices.Clone(s.hooks)
	s.mu.Unlock()
	if s.opts.Dir != "" {
		if err := s.save(pv); err != nil {
			s.log.Warn("keep an impact preview on disk", "proposal_id", pv.ProposalID, "err", err)
		}
	}
	for _, h := range hooks {
		h(pv.ProposalID)
	}
}
