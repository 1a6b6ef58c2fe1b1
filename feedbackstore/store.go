package feedbackstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// Branch is the branch of the feedback repository that holds decisions.
const Branch = "main"

// DecisionsDir is where decision files live in the feedback repository.
const DecisionsDir = "feedback/decisions"

// The defaults of Options; configuration (internal/config) starts from
// these.
const (
	DefaultBatchSize      = 500
	DefaultBatchWait      = 50 * time.Millisecond
	DefaultFollowInterval = time.Second
)

// Options configure a Store. Zero values mean the defaults.
type Options struct {
	// BatchSize is the most decisions one commit holds; default
	// DefaultBatchSize.
	BatchSize int
	// BatchWait is how long a partial batch waits for more decisions;
	// default DefaultBatchWait.
	BatchWait time.Duration
	// FollowInterval is how often the index looks for commits made by
	// other replicas; default DefaultFollowInterval.
	FollowInterval time.Duration
	Logger         *slog.Logger
	// Metrics receives what the store measures; nil measures nothing.
	Metrics Metrics
	// Upstream, when set, is the remote every write goes through: a
	// write returns once the remote holds it, and following fetches it
	// (docs/decisions/0009-replicas.md, "Writes through a git server").
	Upstream *gitrepo.Upstream
	// NodeBranch, with Upstream, is this node's own branch
	// (NodeBranchPrefix + node): decisions are stored on it, and every
	// node orders the node branches' decisions into Branch (order.go).
	NodeBranch string
}

func (o Options) withDefaults() Options {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchWait <= 0 {
		o.BatchWait = DefaultBatchWait
	}
	if o.FollowInterval <= 0 {
		o.FollowInterval = DefaultFollowInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	return o
}

// Store is the durable feedback store of one replica.
type Store struct {
	repo *gitrepo.Repo
	ix   *index
	opts Options

	requests chan *storeRequest
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// followMu serialises index catch-up.
	followMu sync.Mutex
	// own caches the records of this replica's recent commits, so catch-up
	// need not read back what was just written.
	ownMu sync.Mutex
	own   map[gitrepo.Hash][]precept.Feedback

	// notify is closed and replaced whenever new records are indexed.
	notifyMu sync.Mutex
	notify   chan struct{}

	health health

	// ord, orderKick and orderDone run the ordering of node branches
	// (Options.NodeBranch); ord is nil without.
	ord       *orderer
	orderKick chan struct{}
	orderDone chan struct{}
}

// Open opens the store over repo (the feedback repository) with its local
// index at indexPath, brings the index up to date with the branch, and
// starts committing. Close stops it.
func Open(repo *gitrepo.Repo, indexPath string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	ix, err := openIndex(indexPath)
	if err != nil {
		return nil, err
	}
	s := &Store{
		repo:     repo,
		ix:       ix,
		opts:     opts,
		requests: make(chan *storeRequest, 64),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		own:      map[gitrepo.Hash][]precept.Feedback{},
		notify:   make(chan struct{}),
	}
	if opts.NodeBranch != "" {
		if opts.Upstream == nil {
			return nil, errors.Join(errors.New("feedback store: a node branch needs a remote"), ix.close())
		}
		if !strings.HasPrefix(opts.NodeBranch, NodeBranchPrefix) || len(opts.NodeBranch) == len(NodeBranchPrefix) || strings.ContainsAny(opts.NodeBranch[len(NodeBranchPrefix):], "/ ~^:?*[\\") {
			return nil, errors.Join(fmt.Errorf("feedback store: node branch %q: want %s<node>, the node a name without slashes", opts.NodeBranch, NodeBranchPrefix), ix.close())
		}
		s.ord = newOrderer(repo, opts.Upstream)
		s.orderKick = make(chan struct{}, 1)
		s.orderDone = make(chan struct{})
	}
	if err := s.pull(context.Background()); errors.Is(err, gitrepo.ErrDiverged) {
		return nil, errors.Join(fmt.Errorf("feedback repository: %w; start this node from an empty data directory, or bring the remote and the local branch together by hand", err), ix.close())
	} else if err != nil {
		// A node cut from its git server still starts and serves what it
		// has; its writes fail, and are not acknowledged, until the
		// server is back.
		opts.Logger.Warn("feedback remote unreachable at start; writes will fail until it answers", "err", err)
	}
	if _, err := s.CatchUp(context.Background()); err != nil {
		return nil, errors.Join(err, ix.close())
	}
	go s.commitLoop()
	if s.ord != nil {
		go s.orderLoop()
		s.kickOrder()
	}
	return s, nil
}

// Close flushes pending decisions and closes the index. It does not close
// the repository.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	if s.ord != nil {
		<-s.orderDone
	}
	return s.ix.close()
}

// Run follows commits made by other replicas until ctx is done.
func (s *Store) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if s.ord != nil {
				// Ordering fetches, and indexes what it finds.
				s.kickOrder()
				continue
			}
			if err := s.pull(ctx); err != nil && ctx.Err() == nil {
				s.opts.Logger.Warn("fetch the feedback remote failed; will retry", "err", err)
			}
			if _, err := s.CatchUp(ctx); err != nil && ctx.Err() == nil {
				s.opts.Logger.Warn("feedback index catch-up failed; will retry", "err", err)
			}
		}
	}
}

// RemoteTimeout bounds one write through the remote, its retries
// included, and one fetch: a git server that accepts the connection and
// then stalls fails the write (which is then not acknowledged) instead
// of holding the commit loop.
const RemoteTimeout = 2 * time.Minute

// pull brings the branch to the remote's tip when the store has a
// remote.
func (s *Store) pull(ctx context.Context) error {
	if s.opts.Upstream == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, RemoteTimeout)
	defer cancel()
	_, err := s.opts.Upstream.Pull(ctx, Branch)
	return err
}

// update commits fn's changes to the feedback branch: through the remote
// when the store has one, returning once the remote holds them, else
// locally.
func (s *Store) update(ctx context.Context, fn func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error)) (gitrepo.Hash, error) {
	return s.updateOn(ctx, Branch, fn)
}

// updateOn is update of another branch: the node's own.
func (s *Store) updateOn(ctx context.Context, branch string, fn func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error)) (gitrepo.Hash, error) {
	if s.opts.Upstream != nil {
		ctx, cancel := context.WithTimeout(ctx, RemoteTimeout)
		defer cancel()
		return s.opts.Upstream.Update(ctx, branch, fn)
	}
	return s.repo.Update(ctx, branch, fn)
}

type storeRequest struct {
	records []precept.Feedback
	result  chan storeResult
}

type storeResult struct {
	created []bool
	err     error
}

// Store durably stores decisions and returns when the commit that holds
// them exists (with a remote, once the remote holds it); created[i] is false when records[i] was already stored.
// Decisions from concurrent callers share commits.
func (s *Store) Store(ctx context.Context, records []precept.Feedback) ([]bool, error) {
	if len(records) == 0 {
		return nil, nil
	}
	req := &storeRequest{records: records, result: make(chan storeResult, 1)}
	select {
	case s.requests <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.stop:
		return nil, errors.New("store decisions: store is closed")
	}
	select {
	case r := <-req.result:
		return r.created, r.err
	case <-ctx.Done():
		// The commit may still happen; the caller must treat the records
		// as not stored and may safely send them again.
		return nil, ctx.Err()
	}
}

// commitLoop gathers requests into batches and commits them, one batch
// at a time; requests arriving during a commit form the next batch.
func (s *Store) commitLoop() {
	defer close(s.done)
	for {
		var batch []*storeRequest
		n := 0
		select {
		case req := <-s.requests:
			batch = append(batch, req)
			n += len(req.records)
		case <-s.stop:
			s.drain()
			return
		}
		timer := time.NewTimer(s.opts.BatchWait)
	gather:
		for n < s.opts.BatchSize {
			select {
			case req := <-s.requests:
				batch = append(batch, req)
				n += len(req.records)
			case <-timer.C:
				break gather
			case <-s.stop:
				break gather
			}
		}
		timer.Stop()
		s.commitBatch(batch)
	}
}

// drain commits what is queued when the store closes.
func (s *Store) drain() {
	for {
		select {
		case req := <-s.requests:
			s.commitBatch([]*storeRequest{req})
		default:
			return
		}
	}
}

func (s *Store) commitBatch(batch []*storeRequest) {
	start := time.Now()
	var all []precept.Feedback
	for _, req := range batch {
		all = append(all, req.records...)
	}
	created, commit, err := s.commit(context.Background(), all)
	s.health.record(err, time.Now())
	s.opts.Metrics.ObserveCommit(time.Since(start))
	if err == nil && s.ord != nil {
		// Stored on this node's branch; it is numbered once ordered.
		s.opts.Metrics.ObserveBatch(len(all))
		s.kickOrder()
	} else if err == nil {
		s.opts.Metrics.ObserveBatch(len(all))
		if _, cerr := s.CatchUp(context.Background()); cerr != nil {
			// The decisions are durable; the index follows on the next tick.
			s.opts.Logger.Warn("index new decisions", "commit", commit.String(), "err", cerr)
		}
	}
	i := 0
	for _, req := range batch {
		r := storeResult{err: err}
		if err == nil {
			r.created = created[i : i+len(req.records)]
		}
		i += len(req.records)
		req.result <- r
	}
}

// commit writes the decisions that are not stored yet in one commit.
func (s *Store) commit(ctx context.Context, records []precept.Feedback) ([]bool, gitrepo.Hash, error) {
	created := make([]bool, len(records))
	var added []precept.Feedback
	branch, ordered := Branch, (*gitrepo.Snapshot)(nil)
	if s.ord != nil {
		if err := s.nodeBranch(ctx); err != nil {
			return nil, gitrepo.ZeroHash, fmt.Errorf("store decisions: %s: %w", s.opts.NodeBranch, err)
		}
		// A decision another node stored and the order holds is not
		// stored again.
		snap, err := s.repo.Snapshot(Branch)
		if err != nil {
			return nil, gitrepo.ZeroHash, fmt.Errorf("store decisions: %w", err)
		}
		branch, ordered = s.opts.NodeBranch, snap
	}
	tip, err := s.updateOn(ctx, branch, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		added = added[:0]
		seen := make(map[string]bool, len(records))
		layout, marker, err := readLayout(snap)
		if err != nil {
			return nil, err
		}
		var changes []gitrepo.Change
		for i, f := range records {
			created[i] = false
			if seen[f.DecisionID] {
				continue
			}
			seen[f.DecisionID] = true
			path := layout.DecisionPath(f.DecisionID)
			exists, err := snap.Exists(path)
			if err == nil && !exists && ordered != nil {
				exists, err = ordered.Exists(path)
			}
			if err != nil {
				return nil, err
			}
			if exists {
				continue
			}
			data, err := encodeFeedback(f)
			if err != nil {
				return nil, err
			}
			created[i] = true
			added = append(added, f)
			changes = append(changes, gitrepo.Change{Path: path, Data: data})
		}
		if len(changes) == 0 {
			return nil, nil
		}
		if marker != nil {
			changes = append(changes, *marker)
		}
		return &gitrepo.CommitSpec{
			Message:  commitMessage(added),
			Trailers: []gitrepo.Trailer{{Key: "Decision-Count", Value: fmt.Sprint(len(added))}},
			Changes:  changes,
		}, nil
	})
	if err != nil {
		return nil, gitrepo.ZeroHash, fmt.Errorf("store decisions: %w", err)
	}
	if len(added) > 0 && s.ord == nil {
		s.ownMu.Lock()
		s.own[tip] = append([]precept.Feedback(nil), added...)
		s.ownMu.Unlock()
	}
	return created, tip, nil
}

func commitMessage(added []precept.Feedback) string {
	agents := map[string]int{}
	for _, f := range added {
		agents[f.Agent]++
	}
	names := make([]string, 0, len(agents))
	for a := range agents {
		names = append(names, a)
	}
	sort.Strings(names)
	var b strings.Builder
	if len(added) == 1 {
		fmt.Fprintf(&b, "Record decision %s", added[0].DecisionID)
	} else {
		fmt.Fprintf(&b, "Record %d decisions", len(added))
	}
	b.WriteString("\n\n")
	for _, a := range names {
		fmt.Fprintf(&b, "%s: %d\n", a, agents[a])
	}
	return b.String()
}

func encodeFeedback(f precept.Feedback) ([]byte, error) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode decision %s: %w", f.DecisionID, err)
	}
	return append(b, '\n'), nil
}

// Get returns a stored decision, or an error matching precept.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Record, error) {
	r, ok, err := s.ix.get(id)
	if err != nil {
		return Record{}, fmt.Errorf("get decision: %w", err)
	}
	if !ok {
		// Another replica may have stored it since the last catch-up.
		n, err := s.CatchUp(ctx)
		if err != nil {
			return Record{}, fmt.Errorf("get decision: %w", err)
		}
		if n > 0 {
			r, ok, err = s.ix.get(id)
			if err != nil {
				return Record{}, fmt.Errorf("get decision: %w", err)
			}
		}
	}
	if !ok {
		return Record{}, precept.Errorf(precept.NotFound, "decision %q not found", id)
	}
	return r, nil
}

// Decision returns the decision stored under id, or an error matching
// precept.ErrNotFound. The stream consumer compares it with a decision
// sent again under the same id (docs/formats.md, "Dead-letter entries").
func (s *Store) Decision(ctx context.Context, id string) (precept.Decision, error) {
	r, err := s.Get(ctx, id)
	if errors.Is(err, precept.ErrNotFound) && s.ord != nil {
		// Stored on this node's branch and not ordered yet: a stream
		// entry that reuses its id is compared with it all the same.
		return s.unordered(id, err)
	}
	if err != nil {
		return precept.Decision{}, err
	}
	return r.Decision, nil
}

// ListForAgent returns an agent's decisions newest first (by decision
// timestamp), limit at a time; pageToken continues a listing.
func (s *Store) ListForAgent(ctx context.Context, agent string, limit int, pageToken string) ([]Record, string, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.ix.listAgent(agent, limit, pageToken)
}

// Since returns up to limit decisions numbered after seq, in commit
// order.
func (s *Store) Since(seq uint64, limit int) ([]Record, error) {
	entries, err := s.ix.entries(seq, limit, true)
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(entries))
	for i, e := range entries {
		out[i] = *e.Decision
	}
	return out, nil
}

// Entries returns up to limit entries numbered after seq, in commit
// order: decisions and clarification records as each commit wrote them.
// This is how the evaluator follows the store.
func (s *Store) Entries(seq uint64, limit int) ([]Entry, error) {
	return s.ix.entries(seq, limit, false)
}

// Position is where the index stands, for a reader that counts the
// decisions up to Seq and later extends its count with the ones numbered
// after it (Since). A decision deleted or indexed again gives up its
// number, so the decisions numbered up to Seq no longer add up to Count;
// a rebuild of the index (history rewritten) numbers every decision again
// and moves Generation. Either way the reader counts from the first
// decision again.
type Position struct {
	Seq        uint64 // the number of the last indexed entry
	Count      int    // decisions stored
	Generation uint64 // rebuilds of the index so far
}

// Position returns the index's Position, read in one transaction.
func (s *Store) Position() (Position, error) { return s.ix.position() }

// LastSeq returns the number of the last indexed entry.
func (s *Store) LastSeq() (uint64, error) {
	_, seq, err := s.ix.applied()
	return seq, err
}

// Changed returns a channel that is closed when entries are indexed
// after the call.
func (s *Store) Changed() <-chan struct{} {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	return s.notify
}

// Count returns the number of stored decisions.
func (s *Store) Count() (int, error) { return s.ix.count() }

// Repo returns the feedback repository.
func (s *Store) Repo() *gitrepo.Repo { return s.repo }
