package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewRedisFailovers registers precept_redis_failovers_total on reg, read
// from count at scrape time: the changes of the Redis primary this node
// saw Sentinel make (docs/deploy.md, "What to watch"); 0 without
// redis.sentinel.
func NewRedisFailovers(reg prometheus.Registerer, count func() uint64) error {
	_, err := register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "precept_redis_failovers_total",
		Help: "Changes of the Redis primary the sentinels named, seen by this node since it started (asked every 2 s); 0 without redis.sentinel.",
	}, func() float64 { return float64(count()) }))
	return err
}
