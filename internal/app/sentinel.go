package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/internal/config"
)

// dialSentinel returns a client of the primary that Redis Sentinel names
// (redis.sentinel): go-redis's failover client, which asks the sentinels
// again when the primary stops answering or turns into a replica, so the
// stream consumer's retries reach the new primary after a failover
// (docs/operations.md, "Redis with Sentinel"). It fails when no sentinel
// names a primary that answers within 5 s.
func dialSentinel(ctx context.Context, r config.Redis) (*redis.Client, error) {
	opts := &redis.FailoverOptions{
		MasterName:       r.Sentinel.MasterName,
		SentinelAddrs:    r.Sentinel.Addrs,
		SentinelPassword: r.Sentinel.Password,
		Username:         r.Username,
		Password:         r.Password,
		DB:               r.DB,
	}
	if r.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c := redis.NewFailoverClient(opts)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to Redis primary %q through sentinels %s (redis.sentinel): %w",
			r.Sentinel.MasterName, strings.Join(r.Sentinel.Addrs, ","), err)
	}
	return c, nil
}

// failoverPoll is how often primaryWatch asks the sentinels.
const failoverPoll = 2 * time.Second

// primaryWatch asks the sentinels which primary they name and counts
// each change it sees: the failovers an operator watches
// (precept_redis_failovers_total; docs/deploy.md, "What to watch"). It
// asks them itself rather than trusting the failover client's internals,
// which switch primaries without telling anyone.
type primaryWatch struct {
	master string
	opts   []*redis.Options
	log    *slog.Logger
	// primary is the address last named; changes counts the times it
	// moved from one address to another.
	primary string
	changes atomic.Uint64
}

func newPrimaryWatch(r config.Redis, log *slog.Logger) *primaryWatch {
	w := &primaryWatch{master: r.Sentinel.MasterName, log: log}
	for _, addr := range r.Sentinel.Addrs {
		opts := &redis.Options{Addr: addr, Password: r.Sentinel.Password, DialTimeout: time.Second, ReadTimeout: time.Second}
		if r.TLS {
			opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		w.opts = append(w.opts, opts)
	}
	return w
}

// Failovers is how many times the primary changed since start.
func (w *primaryWatch) Failovers() uint64 { return w.changes.Load() }

// run asks every failoverPoll until ctx ends.
func (w *primaryWatch) run(ctx context.Context) {
	var sentinels []*redis.SentinelClient
	for _, o := range w.opts {
		s := redis.NewSentinelClient(o)
		defer s.Close()
		sentinels = append(sentinels, s)
	}
	t := time.NewTicker(failoverPoll)
	defer t.Stop()
	for {
		w.check(ctx, sentinels)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check asks the sentinels in turn until one names the primary. No
// answer changes nothing: a partition from the sentinels is not a
// failover.
func (w *primaryWatch) check(ctx context.Context, sentinels []*redis.SentinelClient) {
	for _, s := range sentinels {
		addr, err := s.GetMasterAddrByName(ctx, w.master).Result()
		if err != nil || len(addr) != 2 {
			continue
		}
		now := net.JoinHostPort(addr[0], addr[1])
		if w.primary != "" && now != w.primary {
			w.changes.Add(1)
			w.log.Warn("Redis primary changed", "master_name", w.master, "from", w.primary, "to", now)
		}
		w.primary = now
		return
	}
}
