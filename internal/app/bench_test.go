package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

// benchEvent is a realistic decision: ids, a verdict and a comment of
// typical length.
func benchEvent(id string, i int) map[string]any {
	return map[string]any{
		"decision_id": id, "gate_id": "HITL-2", "epic_id": fmt.Sprintf("EPIC-%d", i%97),
		"agent": []string{"coding-agent", "test-agent", "docs-agent"}[i%3], "decision": "APPROVED_WITH_CHANGES",
		"reviewer_id": fmt.Sprintf("reviewer-%d", i%13), "timestamp": "2026-11-20T10:00:00Z",
		"review_duration_seconds": "240", "tags": `["tests","error-handling"]`,
		"reviewer_comment": "The retry loop swallows the context error; return it wrapped so callers can tell a timeout from a failure, and add a test for the cancelled case.",
	}
}

func xadd(b *testing.B, rdb *redis.Client, stream, prefix string, n int) {
	ctx := context.Background()
	for start := 0; start < n; start += 500 {
		pipe := rdb.Pipeline()
		for i := start; i < min(n, start+500); i++ {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: benchEvent(fmt.Sprintf("%s-%07d", prefix, i), i)})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// baselineRate is what the same Redis server does with no precept in the
// way: XADD, then XREADGROUP and XACK in batches of 500.
func baselineRate(b *testing.B, rdb *redis.Client, n int) float64 {
	ctx := context.Background()
	stream := fmt.Sprintf("baseline-%d", time.Now().UnixNano())
	if err := rdb.XGroupCreateMkStream(ctx, stream, "g", "0").Err(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	xadd(b, rdb, stream, "base", n)
	read := 0
	for read < n {
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{stream, ">"}, Count: 500}).Result()
		if err != nil {
			b.Fatal(err)
		}
		var ids []string
		for _, m := range res[0].Messages {
			ids = append(ids, m.ID)
		}
		if err := rdb.XAck(ctx, stream, "g", ids...).Err(); err != nil {
			b.Fatal(err)
		}
		read += len(ids)
	}
	rate := float64(n) / time.Since(start).Seconds()
	rdb.Del(ctx, stream)
	return rate
}

func benchConfig(b *testing.B, dir, redisAddr string) config.Config {
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
node: bench
redis: {addr: %q}
`, dir, redisAddr), nil)
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// prefill stores n decisions directly, as if ingested earlier.
func prefill(b *testing.B, a *App, from, to int) {
	ctx := context.Background()
	now := time.Now()
	for start := from; start < to; start += 2000 {
		var batch []precept.Feedback
		for i := start; i < min(to, start+2000); i++ {
			d := precept.Decision{
				DecisionID: fmt.Sprintf("old-%07d", i), GateID: "HITL-2", EpicID: fmt.Sprintf("EPIC-%d", i%97),
				Agent: "coding-agent", Decision: precept.Rejected, ReviewerID: fmt.Sprintf("reviewer-%d", i%13),
				Timestamp: now.Add(-time.Duration(i) * time.Second), ReviewerComment: "earlier feedback about error handling and tests",
			}
			if err := d.Validate(precept.Limits{}, now); err != nil {
				b.Fatal(err)
			}
			batch = append(batch, precept.NewFeedback(d, "bench", now))
		}
		if _, err := a.Feedback.Store(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// ingestRate XADDs n decisions, runs preceptd until all are stored and
// acknowledged, and returns decisions per second from first entry to last
// acknowledgement.
func ingestRate(b *testing.B, a *App, rdb *redis.Client, prefix string, n int) float64 {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	before, _ := a.Feedback.Count()
	xadd(b, rdb, a.Config.Redis.Stream, prefix, n)
	start := time.Now()
	go func() { a.Consumer.Run(ctx); close(done) }()
	for {
		c, _ := a.Feedback.Count()
		if c-before >= n {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rate := float64(n) / time.Since(start).Seconds()
	cancel()
	<-done
	return rate
}

// BenchmarkIngest measures stream-to-git ingest throughput with 10k and
// 100k decisions already stored (testenv.BenchSizes), the raw Redis rate
// as a baseline in the same run, and the restart time with the most
// stored. Run it with -benchtime 1x: each phase measures itself.
// PRECEPT_BENCH_CPUPROFILE=file profiles the ingest at the largest size.
func BenchmarkIngest(b *testing.B) {
	sizes := testenv.BenchSizes(b)
	redisAddr := testenv.Redis(b)
	rdb := testenv.RedisClient(b, redisAddr)
	dir := b.TempDir()
	const batch = 20000
	for range b.N {
		base := baselineRate(b, rdb, batch)
		a, err := New(b.Context(), benchConfig(b, dir, redisAddr), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		var rates []string
		prefilled := 0
		for i, size := range sizes {
			prefill(b, a, prefilled, size)
			prefilled = size
			if f := os.Getenv("PRECEPT_BENCH_CPUPROFILE"); f != "" && i == len(sizes)-1 {
				out, _ := os.Create(f)
				pprof.StartCPUProfile(out)
			}
			rate := ingestRate(b, a, rdb, sizeLabel(size), batch)
			pprof.StopCPUProfile()
			label := "@" + sizeLabel(size)
			b.ReportMetric(rate, "decisions/s"+label)
			b.ReportMetric(rate/base, "ratio"+label)
			rates = append(rates, fmt.Sprintf("%.0f/s at %d stored (%.2f of baseline)", rate, size, rate/base))
		}
		stored, _ := a.Feedback.Count()
		a.Close()

		start := time.Now()
		a, err = New(b.Context(), benchConfig(b, dir, redisAddr), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Ready(context.Background()); err != nil {
			b.Fatal(err)
		}
		restart := time.Since(start)
		a.Close()

		b.ReportMetric(base, "baseline-decisions/s")
		b.ReportMetric(restart.Seconds(), "restart-s")
		b.Logf("baseline %.0f/s; ingest %s; restart with %d stored: %s",
			base, strings.Join(rates, ", "), stored, restart.Round(time.Millisecond))
	}
}

// sizeLabel names a count of stored decisions in a metric's unit:
// "10k" for 10,000, "1500" for 1,500.
func sizeLabel(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
