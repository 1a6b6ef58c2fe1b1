package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Results counted by precept_stream_decisions_total.
const (
	resultStored     = "stored"
	resultDuplicate  = "duplicate"
	resultDeadLetter = "dead_letter"
)

// statsInterval is how often Run refreshes the stream gauges.
const statsInterval = 5 * time.Second

// metrics are the consumer's Prometheus collectors.
type metrics struct {
	decisions    *prometheus.CounterVec
	lag          prometheus.Gauge
	pending      prometheus.Gauge
	deadLetters  prometheus.Gauge
	storeSeconds prometheus.Histogram
}

// newMetrics creates the collectors and registers them on reg when it is
// not nil. A collector already registered (a second consumer in the same
// process) is shared rather than refused.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_stream_decisions_total",
			Help: "Decision stream entries handled, by result: stored, duplicate (already stored) or dead_letter.",
		}, []string{"result"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "precept_stream_lag",
			Help: "Entries in the decision stream not yet delivered to the consumer group.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "precept_stream_pending",
			Help: "Entries delivered to the consumer group and not yet acknowledged.",
		}),
		deadLetters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "precept_stream_dlq_length",
			Help: "Entries in the dead-letter stream.",
		}),
		storeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "precept_stream_store_seconds",
			Help:    "Latency of storing one batch of decisions in the durable sink.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}),
	}
	for _, r := range []string{resultStored, resultDuplicate, resultDeadLetter} {
		m.decisions.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.decisions, err = register(reg, m.decisions); err != nil {
		return nil, err
	}
	if m.lag, err = register(reg, m.lag); err != nil {
		return nil, err
	}
	if m.pending, err = register(reg, m.pending); err != nil {
		return nil, err
	}
	if m.deadLetters, err = register(reg, m.deadLetters); err != nil {
		return nil, err
	}
	if m.storeSeconds, err = register(reg, m.storeSeconds); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register stream metrics: %w", err)
}

// Stats describe the decision stream as seen by the consumer group.
type Stats struct {
	// Lag is how many entries the group has not yet been delivered, or -1
	// when Redis cannot tell (or the group does not exist yet).
	Lag int64
	// Pending is how many entries were delivered to the group's consumers
	// and are not yet acknowledged.
	Pending int64
	// DeadLetters is the length of the dead-letter stream.
	DeadLetters int64
}

// Stats reads the group's lag and pending count and the dead-letter
// stream's length. Lag comes from XINFO GROUPS; when Redis reports none it
// is entries-added minus entries-read, where both are known.
func (c *Consumer) Stats(ctx context.Context) (Stats, error) {
	var (
		groups *redis.XInfoGroupsCmd
		info   *redis.XInfoStreamCmd
		dlqLen *redis.IntCmd
	)
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		groups = p.XInfoGroups(ctx, c.opts.Stream)
		info = p.XInfoStream(ctx, c.opts.Stream)
		dlqLen = p.XLen(ctx, c.opts.DeadLetterStream)
		return nil
	})
	s := Stats{Lag: -1}
	if err := dlqLen.Err(); err != nil {
		return s, fmt.Errorf("read stream stats: %w", err)
	}
	s.DeadLetters = dlqLen.Val()
	if err != nil {
		if isNoSuchKey(groups.Err()) {
			return s, nil
		}
		return s, fmt.Errorf("read stream stats: %w", err)
	}
	for _, g := range groups.Val() {
		if g.Name != c.opts.Group {
			continue
		}
		s.Pending = g.Pending
		switch added := info.Val().EntriesAdded; {
		case g.Lag >= 0:
			s.Lag = g.Lag
		case g.EntriesRead > 0 && added >= g.EntriesRead:
			s.Lag = added - g.EntriesRead
		}
	}
	return s, nil
}

// refreshStats trims the dead-letter stream and updates the gauges every
// interval until ctx is done.
func (c *Consumer) refreshStats(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := c.trimDeadLetters(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("trim the dead-letter stream", "err", err)
		}
		if err := c.updateGauges(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("read decision stream stats", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// updateGauges sets the lag, pending and dead-letter gauges from Stats; an
// unknown lag leaves the lag gauge as it was.
func (c *Consumer) updateGauges(ctx context.Context) error {
	s, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	if s.Lag >= 0 {
		c.metrics.lag.Set(float64(s.Lag))
	}
	c.metrics.pending.Set(float64(s.Pending))
	c.metrics.deadLetters.Set(float64(s.DeadLetters))
	return nil
}

// isNoSuchKey reports Redis's answer to XINFO on a missing stream.
func isNoSuchKey(err error) bool {
	return redis.HasErrorPrefix(err, "no such key")
}
