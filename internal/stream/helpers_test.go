package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/testenv"
)

// testNow is the consumer's clock in tests; events are stamped before it.
var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

const testStream = "asdlc:events:hitl_decisions"

// memSink is an in-memory Sink that deduplicates by decision_id, like the
// real store, and can be told to fail or to block.
type memSink struct {
	mu       sync.Mutex
	records  map[string]precept.Feedback
	received map[string]int // Store receptions per decision_id
	calls    int
	failures int
	fail     error
	// block, when not nil, holds every Store call until it is closed or
	// the call's context is done.
	block chan struct{}
	// entered is signalled (without blocking) when a Store call starts.
	entered chan struct{}
}

var _ Sink = (*memSink)(nil)

func newMemSink() *memSink {
	return &memSink{
		records:  make(map[string]precept.Feedback),
		received: make(map[string]int),
		entered:  make(chan struct{}, 1),
	}
}

func (s *memSink) Store(ctx context.Context, records []precept.Feedback) ([]bool, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail != nil {
		s.failures++
		return nil, s.fail
	}
	created := make([]bool, len(records))
	for i, r := range records {
		s.received[r.DecisionID]++
		if _, ok := s.records[r.DecisionID]; !ok {
			s.records[r.DecisionID] = r
			created[i] = true
		}
	}
	return created, nil
}

func (s *memSink) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *memSink) setBlock(ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.block = ch
}

func (s *memSink) stored() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

func (s *memSink) failureCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures
}

func (s *memSink) record(id string) (precept.Feedback, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.records[id]
	return f, ok
}

// countingSink counts the records one consumer handed to a shared sink.
type countingSink struct {
	Sink
	mu sync.Mutex
	n  int
}

func (s *countingSink) Store(ctx context.Context, records []precept.Feedback) ([]bool, error) {
	created, err := s.Sink.Store(ctx, records)
	if err == nil {
		s.mu.Lock()
		s.n += len(records)
		s.mu.Unlock()
	}
	return created, err
}

func (s *countingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// flatEvent is a valid event in the flat encoding, as ordered name/value
// pairs.
func flatEvent(id string) []any {
	return []any{
		"decision_id", id,
		"gate_id", "HITL-2",
		"epic_id", "EPIC-7",
		"task_id", "T-1",
		"agent", "coder",
		"decision", "REJECTED",
		"reviewer_id", "alice",
		"timestamp", "2026-04-30T10:00:00Z",
		"review_duration_seconds", "42",
		"reviewer_comment", "Use the shared HTTP client instead of http.DefaultClient.",
		"tags", `["style","HTTP"]`,
		"scope_path", "services/api/client.go",
		"rating", "negative",
		"error_categories", `["design"]`,
		"quality_scores", `{"clarity":60}`,
		"prompt_version", "pv-1",
	}
}

// jsonEvent is the same event in the data encoding.
func jsonEvent(id string) []any {
	return []any{"data", jsonData(id, nil)}
}

// jsonData is the event as a JSON object, with changes applied (a nil
// value removes the key).
func jsonData(id string, changes map[string]any) string {
	obj := map[string]any{
		"decision_id":             id,
		"gate_id":                 "HITL-2",
		"epic_id":                 "EPIC-7",
		"task_id":                 "T-1",
		"agent":                   "coder",
		"decision":                "REJECTED",
		"reviewer_id":             "alice",
		"timestamp":               "2026-04-30T10:00:00Z",
		"review_duration_seconds": 42,
		"reviewer_comment":        "Use the shared HTTP client instead of http.DefaultClient.",
		"tags":                    []string{"style", "HTTP"},
		"scope_path":              "services/api/client.go",
		"rating":                  "negative",
		"error_categories":        []string{"design"},
		"quality_scores":          map[string]int{"clarity": 60},
		"prompt_version":          "pv-1",
	}
	for k, v := range changes {
		if v == nil {
			delete(obj, k)
		} else {
			obj[k] = v
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// with returns pairs with name set to value (appended when missing).
func with(pairs []any, name string, value any) []any {
	out := append([]any(nil), pairs...)
	for i := 0; i < len(out); i += 2 {
		if out[i] == name {
			out[i+1] = value
			return out
		}
	}
	return append(out, name, value)
}

// without returns pairs without name.
func without(pairs []any, name string) []any {
	var out []any
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i] != name {
			out = append(out, pairs[i], pairs[i+1])
		}
	}
	return out
}

// valuesMap is pairs as the client returns an entry's fields.
func valuesMap(pairs []any) map[string]any {
	m := make(map[string]any, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i].(string)] = pairs[i+1]
	}
	return m
}

func xadd(t testing.TB, rdb redis.UniversalClient, stream string, pairs []any) string {
	t.Helper()
	id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, Values: pairs}).Result()
	if err != nil {
		t.Fatalf("XADD: %v", err)
	}
	return id
}

// testOptions are options for a test consumer: fast retries and claims,
// the test clock.
func testOptions(consumer string) Options {
	return Options{
		Stream:        testStream,
		Consumer:      consumer,
		Block:         50 * time.Millisecond,
		ClaimInterval: 50 * time.Millisecond,
		Now:           func() time.Time { return testNow },
		Logger:        slog.New(slog.DiscardHandler),
	}
}

func newRedis(t testing.TB) *redis.Client {
	t.Helper()
	return testenv.RedisClient(t, testenv.Redis(t))
}

func newConsumer(t testing.TB, rdb redis.UniversalClient, sink Sink, opts Options) *Consumer {
	t.Helper()
	c, err := New(rdb, sink, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// start runs c until the returned stop is called (or the test ends) and
// fails the test if Run returns an error.
func start(t testing.TB, c *Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pendingCount(t testing.TB, rdb redis.UniversalClient, stream, group string) int64 {
	t.Helper()
	p, err := rdb.XPending(context.Background(), stream, group).Result()
	if err != nil {
		t.Fatalf("XPENDING: %v", err)
	}
	return p.Count
}

func streamLen(t testing.TB, rdb redis.UniversalClient, stream string) int64 {
	t.Helper()
	n, err := rdb.XLen(context.Background(), stream).Result()
	if err != nil {
		t.Fatalf("XLEN: %v", err)
	}
	return n
}

// counter reads precept_stream_decisions_total{result}.
func counter(c *Consumer, result string) float64 {
	return testValue(c.metrics.decisions.WithLabelValues(result))
}

var errSinkDown = errors.New("disk on fire")

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

func (s *memSink) Decision(_ context.Context, id string) (precept.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.records[id]
	if !ok {
		return precept.Decision{}, precept.Errorf(precept.NotFound, "decision %q not found", id)
	}
	return f.Decision, nil
}
