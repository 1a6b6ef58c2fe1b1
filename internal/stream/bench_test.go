package stream

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
)

// benchBatch is the pipelining depth of the raw baseline, matching the
// consumer's default BatchSize.
const benchBatch = 500

// BenchmarkXAddReadGroupBaseline measures what the same redis-server does
// without the consumer: XADD, XREADGROUP and XACK of decision events,
// pipelined in batches of 500. It is the ceiling for
// BenchmarkConsumerThroughput.
func BenchmarkXAddReadGroupBaseline(b *testing.B) {
	rdb := newRedis(b)
	ctx := context.Background()
	if err := rdb.XGroupCreateMkStream(ctx, testStream, DefaultGroup, "0").Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(benchBatch, b.N-done)
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				p.XAdd(ctx, &redis.XAddArgs{Stream: testStream, Values: flatEvent(fmt.Sprintf("d-%d", done+i))})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		streams, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: DefaultGroup, Consumer: "bench", Streams: []string{testStream, ">"}, Count: benchBatch, Block: -1,
		}).Result()
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, 0, n)
		for _, m := range streams[0].Messages {
			ids = append(ids, m.ID)
		}
		if err := rdb.XAck(ctx, testStream, DefaultGroup, ids...).Err(); err != nil {
			b.Fatal(err)
		}
		done += len(ids)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// noopSink is a durable sink with nothing to do: it measures the
// consumer's own cost.
type noopSink struct{ n atomic.Int64 }

func (s *noopSink) Store(_ context.Context, records []precept.Feedback) ([]bool, error) {
	created := make([]bool, len(records))
	for i := range created {
		created[i] = true
	}
	s.n.Add(int64(len(records)))
	return created, nil
}

// Decision is never called: noopSink creates every record.
func (s *noopSink) Decision(context.Context, string) (precept.Decision, error) {
	return precept.Decision{}, precept.ErrNotFound
}

// BenchmarkConsumerThroughput adds b.N valid events, then times the
// consumer (default options) reading, validating, storing in a no-op sink
// and acknowledging all of them.
func BenchmarkConsumerThroughput(b *testing.B) {
	rdb := newRedis(b)
	ctx := context.Background()
	for done := 0; done < b.N; done += benchBatch {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := done; i < min(done+benchBatch, b.N); i++ {
				p.XAdd(ctx, &redis.XAddArgs{Stream: testStream, Values: flatEvent(fmt.Sprintf("d-%d", i))})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	sink := &noopSink{}
	opts := testOptions("bench")
	opts.Block = DefaultBlock
	c := newConsumer(b, rdb, sink, opts)

	b.ResetTimer()
	stop := start(b, c)
	for sink.n.Load() < int64(b.N) || pendingCount(b, rdb, testStream, DefaultGroup) > 0 {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
