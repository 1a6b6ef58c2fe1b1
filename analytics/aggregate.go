package analytics

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/feedbackstore"
)

// Feed is what an Aggregate follows: the feedback store's decisions in
// commit order (feedbackstore.Store implements it).
type Feed interface {
	Since(seq uint64, limit int) ([]feedbackstore.Record, error)
	LastSeq() (uint64, error)
	Changed() <-chan struct{}
}

var _ Feed = (*feedbackstore.Store)(nil)

// Lookup returns what the evaluator recorded about a decision (Facts),
// ok false while it has not evaluated it. internal/app reads it from
// (*evaluator.Service).Evaluation and Review.
type Lookup func(ctx context.Context, decisionID string) (facts Facts, ok bool, err error)

// Evaluated is what the evaluator just recorded about a decision, as
// its whole current state: it replaces what was counted, so a decision
// can also move back (no longer unclear, no category, no rubric) and the
// figures stay what a rebuild would count (docs/analytics.md, "Unclear
// feedback").
type Evaluated struct {
	DecisionID string
	// Evaluation says the report carries the decision's evaluation:
	// Category and Rubric replace the counted ones (empty and nil: none).
	// A report without it (a needs-review record moved on) leaves them.
	Evaluation bool
	Category   string
	Rubric     []Attribute
	// Review and ResolvedAt always replace the counted ones: NotUnclear
	// when the decision has no needs-review record.
	Review     Review
	ResolvedAt time.Time
}

// Metrics receives what an Aggregate counts; internal/metrics turns it
// into Prometheus series with bounded labels.
type Metrics interface {
	// Counted is called once for each decision added, after it is saved.
	Counted(agent, gate string, verdict precept.Verdict, firstAttempt bool, reviewSeconds *int64)
	// Followed reports the feedback-store position reached.
	Followed(seq uint64)
}

type nopMetrics struct{}

func (nopMetrics) Counted(string, string, precept.Verdict, bool, *int64) {}
func (nopMetrics) Followed(uint64)                                       {}

// The defaults of Options; internal/config starts from them.
const (
	// DefaultBatchSize is how many decisions one step reads and saves in
	// one bbolt transaction.
	DefaultBatchSize = 1024
	// DefaultPollInterval is how often the aggregate looks for decisions
	// when no change was signalled.
	DefaultPollInterval = 5 * time.Second
	// DefaultStepInterval is how long a signalled change waits, so that
	// one step takes in what arrives meanwhile.
	DefaultStepInterval = time.Second
	// DefaultMaxRangeDays bounds a query's range.
	DefaultMaxRangeDays = 731
	// DefaultMaxSeries bounds the series a split query returns.
	DefaultMaxSeries = 100
	// DefaultMetricsMaxAgents and DefaultMetricsMaxGates bound the agent
	// and gate label values of the Prometheus series (internal/metrics).
	DefaultMetricsMaxAgents = 20
	DefaultMetricsMaxGates  = 20
)

// Options tune an Aggregate; zero values mean the defaults.
type Options struct {
	BatchSize    int
	PollInterval time.Duration
	StepInterval time.Duration
	MaxRangeDays int
	MaxSeries    int
	// Evaluations looks up what the evaluator recorded about decisions
	// it evaluated before the aggregate reached them; nil counts no
	// lesson categories, rubric or unclear feedback.
	Evaluations Lookup
	// NoSync skips fsync on commit (benchmarks and tests only).
	NoSync  bool
	Metrics Metrics
	Logger  *slog.Logger
	Now     func() time.Time
}

func (o Options) withDefaults() Options {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.StepInterval <= 0 {
		o.StepInterval = DefaultStepInterval
	}
	if o.MaxRangeDays <= 0 {
		o.MaxRangeDays = DefaultMaxRangeDays
	}
	if o.MaxSeries <= 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// entry is a cell in memory; queries read entry.cell under Aggregate.mu.
type entry struct {
	key  cellKey
	cell *Cell
}

// Aggregate keeps the figures per agent, gate and day, following a Feed.
type Aggregate struct {
	feed Feed
	db   *store
	opts Options

	// stepMu makes steps one at a time; only a step writes cells.
	stepMu sync.Mutex
	// mu guards what queries read.
	mu    sync.RWMutex
	cells map[cellKey]*entry
	byDay map[int32][]*entry
	// rolled holds, per day and agent, the sum of its gates' cells
	// (keys with an empty gate), for queries that neither filter nor
	// split by gate; install keeps it up to date in place.
	rolled  map[cellKey]*entry
	rollDay map[int32][]*entry
	pos     uint64
	// names numbers label names; adding one takes mu.
	names *interner

	queueMu sync.Mutex
	queue   []Evaluated
	wake    chan struct{}
}

// Open opens (or creates) the aggregate's file at path and loads its
// cells. A missing file starts from the beginning of the feed.
func Open(feed Feed, path string, opts Options) (*Aggregate, error) {
	opts = opts.withDefaults()
	db, err := openStore(path, opts.NoSync, opts.Evaluations != nil)
	if err != nil {
		return nil, err
	}
	a := &Aggregate{feed: feed, db: db, opts: opts, wake: make(chan struct{}, 1)}
	if err := a.load(); err != nil {
		db.close()
		return nil, err
	}
	return a, nil
}

func (a *Aggregate) load() error {
	cells := map[cellKey]*entry{}
	byDay := map[int32][]*entry{}
	rolled := map[cellKey]*entry{}
	rollDay := map[int32][]*entry{}
	// A lock of its own while loading: nothing reads the new names yet.
	names := newInterner(&sync.Mutex{})
	pos, err := a.db.load(names, func(k cellKey, c *Cell) {
		e := &entry{key: k, cell: c}
		cells[k] = e
		byDay[k.Day] = append(byDay[k.Day], e)
		roll(rolled, rollDay, k).cell.addCell(c, 1)
	})
	if err != nil {
		return err
	}
	names.mu = &a.mu
	a.mu.Lock()
	a.cells, a.byDay, a.rolled, a.rollDay, a.pos, a.names = cells, byDay, rolled, rollDay, pos, names
	a.mu.Unlock()
	return nil
}

// Close closes the aggregate's file.
func (a *Aggregate) Close() error { return a.db.close() }

// Position returns the feed position the figures include.
func (a *Aggregate) Position() uint64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.pos
}

// Evaluated hands the aggregate lesson categories the evaluator recorded
// (evaluator.Options.OnEvaluated). It only queues them: the next step
// counts them, so the evaluator never waits on the aggregate.
func (a *Aggregate) Evaluated(evs []Evaluated) {
	if len(evs) == 0 {
		return
	}
	a.queueMu.Lock()
	a.queue = append(a.queue, evs...)
	a.queueMu.Unlock()
	a.signal()
}

func (a *Aggregate) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// takeQueue takes up to max queued lessons, the oldest first.
func (a *Aggregate) takeQueue(max int) []Evaluated {
	a.queueMu.Lock()
	defer a.queueMu.Unlock()
	n := min(max, len(a.queue))
	q := a.queue[:n:n]
	a.queue = a.queue[n:]
	if len(a.queue) == 0 {
		a.queue = nil
	}
	return q
}

func (a *Aggregate) requeue(q []Evaluated) {
	a.queueMu.Lock()
	a.queue = append(q, a.queue...)
	a.queueMu.Unlock()
}

// Run follows the feed until ctx is done.
func (a *Aggregate) Run(ctx context.Context) error {
	if err := a.resolvePending(ctx); err != nil {
		a.opts.Logger.Warn("look up lessons of decisions counted before their evaluation", "err", err)
	}
	for {
		changed := a.feed.Changed()
		recs, queued, err := a.step(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return a.finalStep()
			}
			a.opts.Logger.Warn("analytics step failed; will retry", "err", err)
		} else if recs == a.opts.BatchSize {
			continue // catching up with the store
		}
		if queued == a.opts.BatchSize {
			// More lessons wait: take them at the next interval, so a
			// burst (the evaluator finishing a backlog) is spread out
			// rather than one long transaction.
			a.signal()
		}
		select {
		case <-ctx.Done():
			return a.finalStep()
		case <-changed:
		case <-a.wake:
		case <-time.After(a.opts.PollInterval):
		}
		// Gather what arrives meanwhile into the next step: one
		// transaction (and one fsync) per interval while decisions flow,
		// instead of one per feedback commit and evaluator batch.
		select {
		case <-ctx.Done():
			return a.finalStep()
		case <-time.After(a.opts.StepInterval):
		}
	}
}

// finalStep applies, at shutdown, the reclassifications the evaluator
// handed over and no step took yet: they are not reported again, so a
// queue left behind would keep old categories until a rebuild. A crash
// can still lose them (docs/analytics.md, "Lesson categories").
func (a *Aggregate) finalStep() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		recs, queued, err := a.step(ctx)
		if err != nil {
			a.opts.Logger.Warn("analytics: last step at shutdown failed", "err", err)
			return nil
		}
		if recs == 0 && queued == 0 {
			return nil
		}
	}
}

// resolvePending looks up the lessons of decisions counted before the
// evaluator evaluated them, for evaluations that happened while no
// aggregate was listening (the process stopped in between).
func (a *Aggregate) resolvePending(ctx context.Context) error {
	if a.opts.Evaluations == nil {
		return nil
	}
	ids, err := a.db.pendingIDs()
	if err != nil {
		return err
	}
	var found []Evaluated
	for _, id := range ids {
		f, ok, err := a.opts.Evaluations(ctx, id)
		if err != nil {
			return err
		}
		if ok {
			found = append(found, Evaluated{DecisionID: id, Evaluation: true, Category: f.Category, Rubric: f.Rubric, Review: f.Review, ResolvedAt: f.ResolvedAt})
		}
	}
	a.Evaluated(found)
	return nil
}

// Step adds the next batch of decisions, and up to a batch of the lesson
// categories queued since, in one transaction; it returns how many of
// both it handled.
func (a *Aggregate) Step(ctx context.Context) (int, error) {
	recs, queued, err := a.step(ctx)
	return recs + queued, err
}

// step returns how many decisions and how many queued lessons it took.
func (a *Aggregate) step(ctx context.Context) (int, int, error) {
	a.stepMu.Lock()
	defer a.stepMu.Unlock()
	pos := a.Position()
	recs, err := a.feed.Since(pos, a.opts.BatchSize)
	if err != nil {
		return 0, 0, fmt.Errorf("read decisions: %w", err)
	}
	if len(recs) == 0 {
		reset, err := a.checkRenumbered(pos)
		if err != nil || reset {
			// After a reset the position is stale: start again next step.
			return 0, 0, err
		}
	}
	queued := a.takeQueue(a.opts.BatchSize)
	if len(recs) == 0 && len(queued) == 0 {
		return 0, 0, nil
	}
	facts, err := a.lookupFacts(ctx, recs)
	if err != nil {
		a.requeue(queued)
		return 0, 0, err
	}
	b := &batch{a: a, dirty: map[cellKey]*Cell{}, facts: facts, track: a.opts.Evaluations != nil}
	if len(recs) > 0 {
		pos = recs[len(recs)-1].Seq
	}
	if err := a.db.update(func(tx *storeTx) error { return b.apply(tx, recs, queued, pos) }); err != nil {
		a.requeue(queued)
		return 0, 0, fmt.Errorf("save analytics: %w", err)
	}
	a.install(b.dirty, pos)
	for _, r := range b.counted {
		a.opts.Metrics.Counted(r.rec.Agent, r.rec.GateID, r.rec.Decision.Decision, r.first, r.rec.ReviewDurationSeconds)
	}
	a.opts.Metrics.Followed(pos)
	return len(recs), len(queued), nil
}

// checkRenumbered starts again when the feed's numbering no longer
// reaches the position (its history was rewritten and renumbered).
func (a *Aggregate) checkRenumbered(pos uint64) (bool, error) {
	last, err := a.feed.LastSeq()
	if err != nil || last >= pos {
		return false, err
	}
	a.opts.Logger.Warn("the feedback store's numbering is behind the analytics position; rebuilding", "position", pos, "last", last)
	if err := a.db.reset(); err != nil {
		return false, err
	}
	return true, a.load()
}

// lookupFacts asks the evaluator what it recorded about the negative
// decisions in recs (approvals teach no lesson and are not clarified).
func (a *Aggregate) lookupFacts(ctx context.Context, recs []feedbackstore.Record) (map[string]Facts, error) {
	if a.opts.Evaluations == nil {
		return nil, nil
	}
	out := map[string]Facts{}
	for _, r := range recs {
		if !r.Decision.Decision.Negative() {
			continue
		}
		f, ok, err := a.opts.Evaluations(ctx, r.DecisionID)
		if err != nil {
			return nil, fmt.Errorf("look up the evaluation of %s: %w", r.DecisionID, err)
		}
		if ok {
			out[r.DecisionID] = f
		}
	}
	return out, nil
}

// install makes a committed step's cells visible to queries.
func (a *Aggregate) install(dirty map[cellKey]*Cell, pos uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, c := range dirty {
		r := roll(a.rolled, a.rollDay, k).cell
		r.addCell(c, 1)
		if e, ok := a.cells[k]; ok {
			r.addCell(e.cell, -1)
			e.cell = c
			continue
		}
		e := &entry{key: k, cell: c}
		a.cells[k] = e
		a.byDay[k.Day] = append(a.byDay[k.Day], e)
	}
	a.pos = pos
}

// roll returns the rolled-up cell of k's day and agent, creating it.
func roll(rolled map[cellKey]*entry, rollDay map[int32][]*entry, k cellKey) *entry {
	rk := cellKey{Day: k.Day, Agent: k.Agent}
	e, ok := rolled[rk]
	if !ok {
		e = &entry{key: rk, cell: &Cell{}}
		rolled[rk] = e
		rollDay[k.Day] = append(rollDay[k.Day], e)
	}
	return e
}

// counted is a decision a step added, for metrics after the commit.
type counted struct {
	rec   *feedbackstore.Record
	first bool
}

// batch is one step's changes: copies of the cells it touched, so that
// queries see the cells as they were until the transaction commits.
type batch struct {
	a     *Aggregate
	dirty map[cellKey]*Cell
	facts map[string]Facts
	// track records decisions still waiting for their evaluation.
	track   bool
	counted []counted
}

func (b *batch) cell(k cellKey) *Cell {
	if c, ok := b.dirty[k]; ok {
		return c
	}
	c := &Cell{}
	if e, ok := b.a.cells[k]; ok {
		c = e.cell.clone()
	}
	b.dirty[k] = c
	return c
}

func (b *batch) apply(tx *storeTx, recs []feedbackstore.Record, queued []Evaluated, pos uint64) error {
	for i := range recs {
		r := &recs[i]
		k := cellKey{Day: dayOf(r.Timestamp), Agent: r.Agent, Gate: r.GateID}
		first, err := tx.firstAttempt(workItem(r.Decision), r.Seq)
		if err != nil {
			return err
		}
		c := b.cell(k)
		c.addDecision(r.Feedback, first, b.a.names)
		b.counted = append(b.counted, counted{rec: r, first: first})
		arrived := arrival(r.ReceivedAt, r.Timestamp)
		if f, ok := b.facts[r.DecisionID]; ok {
			cf := newCounted(f, arrived)
			c.addFacts(cf, 1, b.a.names)
			if err := tx.putFacts(r.DecisionID, k, cf); err != nil {
				return err
			}
		} else if b.track && r.Decision.Decision.Negative() {
			if err := tx.putPending(r.DecisionID, k, arrived); err != nil {
				return err
			}
		}
	}
	for _, ev := range queued {
		if err := b.evaluated(tx, ev); err != nil {
			return err
		}
	}
	for k, c := range b.dirty {
		if err := tx.putCell(k, c, b.a.names.names); err != nil {
			return err
		}
	}
	return tx.setPosition(pos)
}

// evaluated counts what the evaluator reported about a decision: its
// facts are counted once, and moved when the decision is reclassified or
// its clarification moves on. A decision the aggregate has not reached
// yet is left for its lookup then.
func (b *batch) evaluated(tx *storeTx, ev Evaluated) error {
	k, old, counted, err := tx.counted(ev.DecisionID)
	if err != nil {
		return err
	}
	if !counted {
		var arrived time.Time
		var waiting bool
		k, arrived, waiting, err = tx.pending(ev.DecisionID)
		if err != nil || !waiting {
			return err
		}
		if err := tx.deletePending(ev.DecisionID); err != nil {
			return err
		}
		old = countedFacts{Arrived: arrived}
	}
	now := newCounted(old.merge(ev), old.Arrived)
	if counted {
		if now.same(old) {
			return nil
		}
		b.cell(k).addFacts(old, -1, b.a.names)
	}
	b.cell(k).addFacts(now, 1, b.a.names)
	return tx.putFacts(ev.DecisionID, k, now)
}

// workItem names what a decision was about: the gate, the epic and the
// task (empty when the event has none). Its first decision in commit
// order is its first attempt (docs/analytics.md, "First-pass acceptance").
func workItem(d precept.Decision) []byte {
	b := make([]byte, 0, len(d.GateID)+len(d.EpicID)+len(d.TaskID)+2)
	b = append(b, d.GateID...)
	b = append(b, 0)
	b = append(b, d.EpicID...)
	b = append(b, 0)
	return append(b, d.TaskID...)
}

func seqBytes(seq uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, seq)
	return b
}

var errCorrupt = errors.New("corrupt analytics record")
