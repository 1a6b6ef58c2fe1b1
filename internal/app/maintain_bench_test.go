package app

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
)

// BenchmarkMaintainDuringIngest measures what repository maintenance costs
// ingestion: the ingest rate with 50k decisions stored (scaled by
// testenv.BenchSize), without and then with maintenance rolling packs up
// the whole time, in the same run, and the object-store shape before and
// after. Run it with -benchtime 1x.
func BenchmarkMaintainDuringIngest(b *testing.B) {
	stored := testenv.BenchSize(b, 50_000)
	redisAddr := testenv.Redis(b)
	rdb := testenv.RedisClient(b, redisAddr)
	for range b.N {
		cfg := benchConfig(b, b.TempDir(), redisAddr)
		cfg.Maintenance.MaxPacks = 4
		a, err := New(b.Context(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		prefill(b, a, 0, stored)
		before, _ := a.FeedbackRepo.Stats()
		const batch = 20000
		plain := ingestRate(b, a, rdb, "plain", batch)

		var stop atomic.Bool
		var rounds, rewrites int
		var longest time.Duration
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				start := time.Now()
				rewrote, err := a.FeedbackRepo.Maintain()
				if err != nil {
					b.Error(err)
					return
				}
				rounds++
				if rewrote {
					rewrites++
					longest = max(longest, time.Since(start))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		maintained := ingestRate(b, a, rdb, "maintained", batch)
		stop.Store(true)
		wg.Wait()
		if _, err := a.FeedbackRepo.Maintain(); err != nil {
			b.Fatal(err)
		}
		after, _ := a.FeedbackRepo.Stats()
		count, _ := a.Feedback.Count()
		a.Close()

		b.ReportMetric(plain, "decisions/s")
		b.ReportMetric(maintained, "decisions/s-maintaining")
		b.ReportMetric(maintained/plain, "ratio")
		b.ReportMetric(longest.Seconds(), "longest-round-s")
		b.Logf("%d stored; ingest %.0f/s without maintenance, %.0f/s with maintenance running (%.2f); %d rounds, %d rewrote, longest %s; packs %d→%d, loose %d→%d",
			count, plain, maintained, maintained/plain, rounds, rewrites, longest.Round(time.Millisecond),
			before.Packs, after.Packs, before.Loose, after.Loose)
	}
}
