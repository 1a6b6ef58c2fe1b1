package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
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
