package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
)

// Sink stores decisions durably. Store returns only when every record is
// durable; created[i] is false when records[i].DecisionID was already
// stored (idempotent redelivery). An error means nothing can be assumed
// stored: the entries stay pending and are retried. Decision returns the
// decision stored under an id (an error matching precept.ErrNotFound when
// there is none), so a redelivery can be told from a decision_id reused
// with different content.
type Sink interface {
	Store(ctx context.Context, records []precept.Feedback) (created []bool, err error)
	Decision(ctx context.Context, id string) (precept.Decision, error)
}

// Retry backoff after a failed batch or read: doubling from
// backoffInitial up to backoffMax.
const (
	backoffInitial = 250 * time.Millisecond
	backoffMax     = 5 * time.Second
)

// maxRememberedErrors bounds the per-entry last-error memory used in
// dead-letter reasons; entries claimed away by other replicas would
// otherwise accumulate.
const maxRememberedErrors = 10000

// Consumer reads decision events from a Redis stream as one member of a
// consumer group and stores them through a Sink. Create it with New and
// call Run once.
type Consumer struct {
	rdb     redis.UniversalClient
	sink    Sink
	opts    Options
	log     *slog.Logger
	metrics *metrics

	mu sync.Mutex
	// inFlight holds the ids of entries being processed, so a re-read of
	// pending entries or a claim does not hand them out twice.
	inFlight map[string]bool
	// lastErr holds why the last attempt to store an entry failed.
	lastErr map[string]string
}

// New returns a consumer of opts.Stream that stores decisions in sink. It
// validates opts and registers the metrics; it does not touch Redis.
func New(rdb redis.UniversalClient, sink Sink, opts Options) (*Consumer, error) {
	if rdb == nil {
		return nil, errors.New("new stream consumer: redis client is nil")
	}
	if sink == nil {
		return nil, errors.New("new stream consumer: sink is nil")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkSameSlot(rdb, opts.Stream, opts.DeadLetterStream); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Consumer{
		rdb:      rdb,
		sink:     sink,
		opts:     opts,
		log:      opts.Logger.With("stream", opts.Stream, "group", opts.Group, "consumer", opts.Consumer),
		metrics:  m,
		inFlight: make(map[string]bool),
		lastErr:  make(map[string]string),
	}, nil
}

// Run consumes the stream until ctx is done, then waits up to
// Options.StopTimeout for batches already read to be stored and
// acknowledged, and returns nil. It returns an error only when the
// consumer cannot start: the group cannot be created, or a key holds
// something other than a stream. Redis and sink failures while running
// are logged and retried.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	work, stopWork := afterStop(ctx, c.opts.StopTimeout)
	defer stopWork()

	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		c.refreshStats(ctx, statsInterval)
	}()

	r := &reader{
		c:      c,
		work:   work,
		slots:  make(chan struct{}, c.opts.MaxInFlight),
		failed: make(chan struct{}, 1),
	}
	r.run(ctx)
	r.wg.Wait()
	<-statsDone
	return nil
}

// afterStop returns a context for storing and acknowledging batches
// already read: it outlives ctx by grace, so a shutdown does not throw
// away work that is nearly done.
func afterStop(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-work.Done():
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-work.Done():
		case <-t.C:
			cancel()
		}
	}()
	return work, cancel
}

// prepare creates the group (and the stream) if missing and checks that
// the dead-letter key can take dead letters: inside MULTI/EXEC a failing
// XADD would not stop the XACK after it. Connection errors are retried
// until ctx is done; answers from Redis are final.
func (c *Consumer) prepare(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := c.createGroup(ctx)
		if err == nil {
			var typ string
			typ, err = c.rdb.Type(ctx, c.opts.DeadLetterStream).Result()
			switch {
			case err != nil:
				err = fmt.Errorf("check dead-letter stream %q: %w", c.opts.DeadLetterStream, err)
			case typ != "none" && typ != "stream":
				return fmt.Errorf("check dead-letter stream %q: key holds a %s, not a stream", c.opts.DeadLetterStream, typ)
			default:
				return nil
			}
		}
		var redisErr redis.Error
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &redisErr):
			return err
		}
		c.log.Warn("prepare decision stream, retrying", "err", err)
		if !sleep(ctx, backoff(attempt)) {
			return ctx.Err()
		}
	}
}

func (c *Consumer) createGroup(ctx context.Context) error {
	err := c.rdb.XGroupCreateMkStream(ctx, c.opts.Stream, c.opts.Group, c.opts.StartID).Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("create consumer group %q on %q: %w", c.opts.Group, c.opts.Stream, err)
	}
	return nil
}

// batch is what one read returned, handed to one worker.
type batch struct {
	msgs []redis.XMessage
	// redelivered marks entries read from a pending list (this
	// consumer's own, or claimed): their delivery count is checked.
	redelivered bool
}

// reader is the single goroutine that reads the stream and starts the
// bounded set of workers that store batches.
type reader struct {
	c *Consumer
	// work is the context workers store and acknowledge under.
	work  context.Context
	slots chan struct{}
	wg    sync.WaitGroup
	// failed is signalled when a batch fails, so the reader re-reads its
	// pending entries.
	failed chan struct{}
	// retries counts re-reads after failures since a batch last
	// succeeded, for the backoff.
	retries atomic.Int64
}

// run reads until ctx is done. cursor is where the next read of this
// consumer's own pending entries starts; "" once they are drained and
// new entries are read.
func (r *reader) run(ctx context.Context) {
	c := r.c
	cursor := "0"
	var nextClaim time.Time
	readFailures := 0
	for ctx.Err() == nil {
		select {
		case <-r.failed:
			// Let the other batches finish so the re-read finds exactly
			// what is still unacknowledged.
			r.wg.Wait()
			select {
			case <-r.failed: // another failure of the same round
			default:
			}
			if !sleep(ctx, backoff(int(r.retries.Add(1)))) {
				return
			}
			cursor = "0"
			continue
		default:
		}
		if cursor == "" && !time.Now().Before(nextClaim) {
			r.claim(ctx)
			nextClaim = time.Now().Add(c.opts.ClaimInterval)
			continue
		}
		if !r.acquire(ctx) {
			return
		}
		msgs, err := c.read(ctx, cursor)
		if err != nil {
			r.release()
			if ctx.Err() != nil {
				return
			}
			readFailures++
			c.log.Warn("read decision stream", "err", err)
			if redis.HasErrorPrefix(err, "NOGROUP") {
				if err := c.createGroup(ctx); err != nil {
					c.log.Warn("recreate consumer group", "err", err)
				}
			}
			if !sleep(ctx, backoff(readFailures)) {
				return
			}
			continue
		}
		readFailures = 0
		redelivered := cursor != ""
		if redelivered {
			if len(msgs) == 0 {
				cursor = ""
				r.release()
				continue
			}
			cursor = msgs[len(msgs)-1].ID
		}
		r.dispatch(batch{msgs: msgs, redelivered: redelivered})
	}
}

// claim takes over entries idle longer than ClaimIdle, paging through
// the group's pending list with XAUTOCLAIM.
func (r *reader) claim(ctx context.Context) {
	c := r.c
	start := "0-0"
	for ctx.Err() == nil {
		if !r.acquire(ctx) {
			return
		}
		msgs, next, err := c.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream:   c.opts.Stream,
			Group:    c.opts.Group,
			Consumer: c.opts.Consumer,
			MinIdle:  c.opts.ClaimIdle,
			Start:    start,
			Count:    int64(c.opts.BatchSize),
		}).Result()
		if err != nil {
			r.release()
			if ctx.Err() == nil {
				c.log.Warn("claim idle decision stream entries", "err", err)
			}
			return
		}
		if len(msgs) > 0 {
			c.log.Info("claimed idle decision stream entries", "entries", len(msgs))
		}
		r.dispatch(batch{msgs: msgs, redelivered: true})
		if next == "" || next == "0-0" {
			return
		}
		start = next
	}
}

// acquire takes a worker slot, waiting while MaxInFlight batches are
// being stored.
func (r *reader) acquire(ctx context.Context) bool {
	select {
	case r.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *reader) release() { <-r.slots }

// dispatch hands a batch to a worker, which owns the acquired slot.
func (r *reader) dispatch(b batch) {
	b.msgs = r.c.track(b.msgs)
	if len(b.msgs) == 0 {
		r.release()
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer r.release()
		err := r.c.process(r.work, b)
		r.c.untrack(b.msgs)
		if err == nil {
			r.retries.Store(0)
			return
		}
		r.c.log.Error("process decision stream batch; its entries stay pending and are retried",
			"entries", len(b.msgs), "retries", r.retries.Load(), "err", err)
		select {
		case r.failed <- struct{}{}:
		default:
		}
	}()
}

// read returns the next batch: this consumer's pending entries after
// cursor, or new entries when cursor is "".
func (c *Consumer) read(ctx context.Context, cursor string) ([]redis.XMessage, error) {
	id, block := ">", c.opts.Block
	if cursor != "" {
		// A read of pending entries never blocks; -1 leaves BLOCK out.
		id, block = cursor, -1
	}
	streams, err := c.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    c.opts.Group,
		Consumer: c.opts.Consumer,
		Streams:  []string{c.opts.Stream, id},
		Count:    int64(c.opts.BatchSize),
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read group: %w", err)
	}
	for _, s := range streams {
		if s.Stream == c.opts.Stream {
			return s.Messages, nil
		}
	}
	return nil, nil
}

// process decodes a batch, dead-letters what cannot be stored, stores the
// rest and acknowledges it. It is the one place entries are acknowledged.
func (c *Consumer) process(ctx context.Context, b batch) error {
	now := c.opts.Now()
	var deliveries map[string]int64
	if b.redelivered {
		var err error
		if deliveries, err = c.deliveryCounts(ctx, b.msgs); err != nil {
			return err
		}
	}
	var (
		dead    []deadEntry
		records []precept.Feedback
		kept    []redis.XMessage
	)
	for _, m := range b.msgs {
		n := max(deliveries[m.ID], 1)
		d, err := validate(m.Values, c.opts.Limits, now)
		switch {
		case err != nil:
			dead = append(dead, deadEntry{msg: m, deliveries: n, reason: err.Error(), logReason: logReason(err)})
		case n > int64(c.opts.MaxDeliveries):
			reason := c.overDelivered(m.ID, n)
			dead = append(dead, deadEntry{msg: m, deliveries: n, reason: reason, logReason: reason})
		default:
			f := precept.NewFeedback(d, "stream:"+m.ID, now)
			f.Producer = "stream:" + c.opts.Stream
			records = append(records, f)
			kept = append(kept, m)
		}
	}
	var errs []error
	if len(dead) > 0 {
		if err := c.deadLetter(ctx, dead); err != nil {
			errs = append(errs, err)
		}
	}
	if len(records) > 0 {
		if err := c.storeAndAck(ctx, kept, deliveries, records); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// storeAndAck hands records to the sink and acknowledges their entries
// once the sink has them; an entry whose decision_id was stored with
// other content is dead-lettered instead (reused). A failure of the sink (or of the XACK) is
// retried here, with backoff, on the batch already in memory: re-reading
// the entries from Redis would count as new deliveries, and a store that
// is down for a few seconds would then dead-letter valid decisions. Only
// a real redelivery (after a crash, or a claim) counts toward
// MaxDeliveries. The retries end when ctx does (shutdown), leaving the
// entries pending for the next start.
func (c *Consumer) storeAndAck(ctx context.Context, msgs []redis.XMessage, deliveries map[string]int64, records []precept.Feedback) error {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	for attempt := 1; ; attempt++ {
		err := c.storeAndAckOnce(ctx, msgs, deliveries, records)
		if err == nil {
			if attempt > 1 {
				c.log.Info("stored decisions after retrying", "entries", len(ids), "attempts", attempt)
			}
			return nil
		}
		c.rememberError(ids, err)
		if ctx.Err() != nil {
			return err
		}
		c.log.Error("store decisions; retrying the batch in memory", "entries", len(ids), "attempt", attempt, "err", err)
		if !sleep(ctx, backoff(attempt)) {
			return err
		}
	}
}

func (c *Consumer) storeAndAckOnce(ctx context.Context, msgs []redis.XMessage, deliveries map[string]int64, records []precept.Feedback) error {
	start := time.Now()
	created, err := c.sink.Store(ctx, records)
	c.metrics.storeSeconds.Observe(time.Since(start).Seconds())
	if err == nil && len(created) != len(records) {
		err = fmt.Errorf("sink answered %d results for %d records", len(created), len(records))
	}
	if err != nil {
		return fmt.Errorf("store decisions: %w", err)
	}
	dead, err := c.reused(ctx, msgs, deliveries, records, created)
	if err != nil {
		return err
	}
	stored := 0
	for _, ok := range created {
		if ok {
			stored++
		}
	}
	c.metrics.decisions.WithLabelValues(resultStored).Add(float64(stored))
	c.metrics.decisions.WithLabelValues(resultDuplicate).Add(float64(len(created) - stored - len(dead)))
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if !slices.ContainsFunc(dead, func(d deadEntry) bool { return d.msg.ID == m.ID }) {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) > 0 {
		if err := c.rdb.XAck(ctx, c.opts.Stream, c.opts.Group, ids...).Err(); err != nil {
			return fmt.Errorf("acknowledge stored entries: %w", err)
		}
	}
	c.forgetErrors(ids)
	if len(dead) > 0 {
		return c.deadLetter(ctx, dead)
	}
	return nil
}

// deliveryCounts looks up how often each entry was delivered, from the
// extended XPENDING over the batch's id range, limited to this consumer
// (the entries are in its pending list after a re-read or a claim). An
// entry no longer pending is missing from the result.
func (c *Consumer) deliveryCounts(ctx context.Context, msgs []redis.XMessage) (map[string]int64, error) {
	want := make(map[string]bool, len(msgs))
	lo, hi := msgs[0].ID, msgs[0].ID
	for _, m := range msgs {
		want[m.ID] = true
		if compareIDs(m.ID, lo) < 0 {
			lo = m.ID
		}
		if compareIDs(m.ID, hi) > 0 {
			hi = m.ID
		}
	}
	counts := make(map[string]int64, len(msgs))
	pageSize := int64(max(len(msgs), 100))
	for start := lo; ; {
		page, err := c.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream:   c.opts.Stream,
			Group:    c.opts.Group,
			Start:    start,
			End:      hi,
			Count:    pageSize,
			Consumer: c.opts.Consumer,
		}).Result()
		if err != nil {
			return nil, fmt.Errorf("look up delivery counts: %w", err)
		}
		for _, p := range page {
			if want[p.ID] {
				counts[p.ID] = p.RetryCount
			}
		}
		if int64(len(page)) < pageSize || len(counts) == len(want) {
			return counts, nil
		}
		start = nextID(page[len(page)-1].ID)
	}
}

// overDelivered is the dead-letter reason for an entry delivered too
// often, with the last error this consumer saw for it.
func (c *Consumer) overDelivered(id string, n int64) string {
	reason := fmt.Sprintf("delivered %d times, more than the limit of %d", n, c.opts.MaxDeliveries)
	c.mu.Lock()
	last, ok := c.lastErr[id]
	c.mu.Unlock()
	if ok {
		reason += " (last error: " + last + ")"
	}
	return reason
}

// track marks entries in flight and returns those that were not already.
func (c *Consumer) track(msgs []redis.XMessage) []redis.XMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := msgs[:0:0]
	for _, m := range msgs {
		if !c.inFlight[m.ID] {
			c.inFlight[m.ID] = true
			out = append(out, m)
		}
	}
	return out
}

func (c *Consumer) untrack(msgs []redis.XMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		delete(c.inFlight, m.ID)
	}
}

// maxErrorText bounds a remembered error, which ends up in a dead-letter
// reason.
const maxErrorText = 300

func (c *Consumer) rememberError(ids []string, err error) {
	text := text.Truncate(err.Error(), maxErrorText)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lastErr)+len(ids) > maxRememberedErrors {
		clear(c.lastErr)
	}
	for _, id := range ids {
		c.lastErr[id] = text
	}
}

func (c *Consumer) forgetErrors(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.lastErr, id)
	}
}

// backoff is the wait before retry number n (from 1).
func backoff(n int) time.Duration {
	d := backoffInitial
	for i := 1; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// sleep waits for d or until ctx is done, reporting whether it waited the
// whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
