package stream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/lib/text"
)

func TestNewValidatesOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	sink := newMemSink()
	ok := Options{Consumer: "c1"}
	tests := []struct {
		name    string
		rdb     redis.UniversalClient
		sink    Sink
		opts    Options
		wantErr string
	}{
		{name: "defaults", rdb: rdb, sink: sink, opts: ok},
		{name: "missing consumer", rdb: rdb, sink: sink, opts: Options{}, wantErr: "consumer is required"},
		{name: "nil client", sink: sink, opts: ok, wantErr: "redis client is nil"},
		{name: "nil sink", rdb: rdb, opts: ok, wantErr: "sink is nil"},
		{name: "negative batch size", rdb: rdb, sink: sink, opts: Options{Consumer: "c", BatchSize: -1}, wantErr: "batch size must not be negative"},
		{name: "negative block", rdb: rdb, sink: sink, opts: Options{Consumer: "c", Block: -time.Second}, wantErr: "block must not be negative"},
		{name: "bad start id", rdb: rdb, sink: sink, opts: Options{Consumer: "c", StartID: "yesterday"}, wantErr: "start id"},
		{name: "start at new entries", rdb: rdb, sink: sink, opts: Options{Consumer: "c", StartID: "$"}},
		{name: "dead letters into the stream itself", rdb: rdb, sink: sink, opts: Options{Consumer: "c", Stream: "s", DeadLetterStream: "s"}, wantErr: "must differ"},
		{name: "cluster without a hash tag", rdb: cluster, sink: sink, opts: ok, wantErr: "must share a {hash tag}"},
		{name: "cluster with a shared hash tag", rdb: cluster, sink: sink, opts: Options{Consumer: "c", Stream: "{hitl}:decisions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.rdb, tt.sink, tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if c.opts.DeadLetterStream != c.opts.Stream+":dlq" && tt.opts.DeadLetterStream == "" {
					t.Errorf("dead-letter stream = %q", c.opts.DeadLetterStream)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestStoresBothEncodingsWithTheirFields(t *testing.T) {
	rdb := newRedis(t)
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, testOptions("c1"))
	flatID := xadd(t, rdb, testStream, append(flatEvent("flat-1"), "schema_version", "1", "producer", "hitl-ui"))
	dataID := xadd(t, rdb, testStream, append(jsonEvent("data-1"), "event_type", "hitl.decision", "traceparent", "00-1-2-01"))
	start(t, c)

	waitFor(t, 10*time.Second, "both decisions stored", func() bool { return sink.stored() == 2 })
	waitFor(t, 10*time.Second, "both entries acknowledged", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })

	for _, tt := range []struct{ decisionID, entryID string }{{"flat-1", flatID}, {"data-1", dataID}} {
		t.Run(tt.decisionID, func(t *testing.T) {
			f, _ := sink.record(tt.decisionID)
			if f.Source != "stream:"+tt.entryID {
				t.Errorf("source = %q, want stream:%s", f.Source, tt.entryID)
			}
			if !f.ReceivedAt.Equal(testNow) {
				t.Errorf("received_at = %v, want %v", f.ReceivedAt, testNow)
			}
			d := f.Decision
			if d.GateID != "HITL-2" || d.EpicID != "EPIC-7" || d.TaskID != "T-1" || d.Agent != "coder" || d.ReviewerID != "alice" {
				t.Errorf("identifiers = %+v", d)
			}
			if d.Decision != precept.Rejected {
				t.Errorf("decision = %q", d.Decision)
			}
			if !d.Timestamp.Equal(time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC)) {
				t.Errorf("timestamp = %v", d.Timestamp)
			}
			if d.ReviewDurationSeconds == nil || *d.ReviewDurationSeconds != 42 {
				t.Errorf("review_duration_seconds = %v", d.ReviewDurationSeconds)
			}
			if strings.Join(d.Tags, ",") != "http,style" {
				t.Errorf("tags = %v, want normalized [http style]", d.Tags)
			}
			if strings.Join(d.ErrorCategories, ",") != "design" || d.QualityScores["clarity"] != 60 || d.Rating != "negative" {
				t.Errorf("analytics fields = %v %v %q", d.ErrorCategories, d.QualityScores, d.Rating)
			}
			if d.ScopePath != "services/api/client.go" || d.PromptVersion != "pv-1" {
				t.Errorf("scope_path, prompt_version = %q, %q", d.ScopePath, d.PromptVersion)
			}
			if f.EmbeddingText != d.ReviewerComment {
				t.Errorf("embedding text = %q, want the reviewer comment", f.EmbeddingText)
			}
		})
	}
	if got := counter(c, resultStored); got != 2 {
		t.Errorf("stored counter = %v, want 2", got)
	}
	if got := testValue(c.metrics.storeSeconds); got < 1 {
		t.Errorf("store latency samples = %v, want at least 1", got)
	}
}

// TestDeadLettersEveryKindOfBadEntryAndKeepsItsBytes pins the dead-letter
// contract: each bad entry reaches the DLQ with a reason naming the field
// and its original fields byte for byte, while valid entries around it are
// stored, and nothing stays pending.
func TestDeadLettersEveryKindOfBadEntryAndKeepsItsBytes(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	sink := newMemSink()
	opts := testOptions("c1")
	opts.Limits = testLimits
	opts.BatchSize = 7
	c := newConsumer(t, rdb, sink, opts)

	cases := badEntries()
	if len(cases) < 22 {
		t.Fatalf("only %d kinds of bad input", len(cases))
	}
	// Entries deleted after delivery come back from the consumer's pending
	// list with no fields: deliver them to c1 before anything else exists.
	if err := rdb.XGroupCreateMkStream(ctx, testStream, DefaultGroup, "0").Err(); err != nil {
		t.Fatal(err)
	}
	byEntry := make(map[string]badEntry)
	for _, tt := range cases {
		if !tt.deleted {
			continue
		}
		id := xadd(t, rdb, testStream, flatEvent("to-delete"))
		if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: "c1", Streams: []string{testStream, ">"}, Count: 1, Block: -1}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.XDel(ctx, testStream, id).Err(); err != nil {
			t.Fatal(err)
		}
		byEntry[id] = tt
	}
	valid := 0
	for i, tt := range cases {
		if tt.deleted {
			continue
		}
		xadd(t, rdb, testStream, flatEvent(fmt.Sprintf("ok-%d-a", i)))
		byEntry[xadd(t, rdb, testStream, tt.fields)] = tt
		xadd(t, rdb, testStream, jsonEvent(fmt.Sprintf("ok-%d-b", i)))
		valid += 2
	}
	start(t, c)

	waitFor(t, 15*time.Second, "every bad entry dead-lettered", func() bool {
		return streamLen(t, rdb, testStream+":dlq") == int64(len(cases))
	})
	waitFor(t, 15*time.Second, "every valid entry stored", func() bool { return sink.stored() == valid })
	waitFor(t, 15*time.Second, "nothing pending", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })

	letters, next, total, err := c.DeadLetters(ctx, 1000, "")
	if err != nil {
		t.Fatalf("DeadLetters: %v", err)
	}
	if next != "" || total != int64(len(cases)) || len(letters) != len(cases) {
		t.Fatalf("DeadLetters = %d letters, next %q, total %d; want %d, \"\", %d", len(letters), next, total, len(cases), len(cases))
	}
	for _, l := range letters {
		tt, ok := byEntry[l.OriginalID]
		if !ok {
			t.Errorf("dead letter for unexpected entry %s: %s", l.OriginalID, l.Reason)
			continue
		}
		delete(byEntry, l.OriginalID)
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(l.Reason, tt.want) {
				t.Errorf("reason %q does not contain %q", l.Reason, tt.want)
			}
			if l.Consumer != "c1" || !l.FailedAt.Equal(testNow) || l.Deliveries < 1 {
				t.Errorf("consumer, failed_at, deliveries = %q, %v, %d", l.Consumer, l.FailedAt, l.Deliveries)
			}
			if len(l.Fields) != len(tt.fields)/2 {
				t.Fatalf("%d fields kept, want %d", len(l.Fields), len(tt.fields)/2)
			}
			for i, f := range l.Fields {
				name, value := tt.fields[2*i].(string), tt.fields[2*i+1].(string)
				if !bytes.Equal(f.Name, []byte(name)) || !bytes.Equal(f.Value, []byte(value)) {
					t.Errorf("field %d = %q=%q, want %q=%q", i, text.Truncate(string(f.Name), 40), text.Truncate(string(f.Value), 40), text.Truncate(name, 40), text.Truncate(value, 40))
				}
			}
		})
	}
	for id, tt := range byEntry {
		t.Errorf("no dead letter for %s (%s)", id, tt.name)
	}
	if got := counter(c, resultDeadLetter); got != float64(len(cases)) {
		t.Errorf("dead_letter counter = %v, want %d", got, len(cases))
	}
	if got := counter(c, resultStored); got != float64(valid) {
		t.Errorf("stored counter = %v, want %d", got, valid)
	}
}

func TestStoresARedeliveredDecisionOnceAndAcksBothEntries(t *testing.T) {
	rdb := newRedis(t)
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, testOptions("c1"))
	xadd(t, rdb, testStream, flatEvent("same"))
	xadd(t, rdb, testStream, jsonEvent("same"))
	start(t, c)

	waitFor(t, 10*time.Second, "both entries acknowledged", func() bool {
		return counter(c, resultStored)+counter(c, resultDuplicate) == 2 && pendingCount(t, rdb, testStream, DefaultGroup) == 0
	})
	sink.mu.Lock()
	stored, received := len(sink.records), sink.received["same"]
	sink.mu.Unlock()
	if stored != 1 || received != 2 {
		t.Errorf("sink stored %d records from %d receptions, want 1 from 2", stored, received)
	}
	if counter(c, resultStored) != 1 || counter(c, resultDuplicate) != 1 {
		t.Errorf("stored, duplicate = %v, %v; want 1, 1", counter(c, resultStored), counter(c, resultDuplicate))
	}
}

func TestASinkOutageDelaysButNeverDeadLettersValidEntries(t *testing.T) {
	rdb := newRedis(t)
	sink := newMemSink()
	sink.setFail(errSinkDown)
	opts := testOptions("c1")
	opts.BatchSize = 5
	// Even the strictest limit must not turn an outage into dead letters.
	opts.MaxDeliveries = 1
	c := newConsumer(t, rdb, sink, opts)
	want := ids("d", 20)
	for _, id := range want {
		xadd(t, rdb, testStream, flatEvent(id))
	}
	start(t, c)

	// The failing batches are retried in memory, several times over.
	waitFor(t, 20*time.Second, "repeated store attempts", func() bool { return sink.failureCount() >= 6 })
	pend, err := rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: testStream, Group: DefaultGroup, Start: "-", End: "+", Count: 100}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) == 0 {
		t.Fatal("nothing pending while the sink fails")
	}
	for _, p := range pend {
		if p.RetryCount != 1 {
			t.Errorf("entry %s delivered %d times during an outage; in-memory retries must not redeliver", p.ID, p.RetryCount)
		}
	}
	if n := streamLen(t, rdb, testStream+":dlq"); n != 0 {
		t.Errorf("dead letters during an outage = %d, want 0", n)
	}
	if n := sink.stored(); n != 0 {
		t.Errorf("stored while failing = %d, want 0", n)
	}

	sink.setFail(nil)
	waitFor(t, 20*time.Second, "every decision stored", func() bool { return sink.stored() == len(want) })
	waitFor(t, 15*time.Second, "every entry acknowledged", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })
	for _, id := range want {
		if _, ok := sink.record(id); !ok {
			t.Errorf("decision %s not stored", id)
		}
	}
	if n := streamLen(t, rdb, testStream+":dlq"); n != 0 {
		t.Errorf("dead letters after the outage = %d, want 0", n)
	}
}

func TestDeadLettersClaimedEntriesDeliveredTooOften(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	if err := rdb.XGroupCreateMkStream(ctx, testStream, DefaultGroup, "0").Err(); err != nil {
		t.Fatal(err)
	}
	poison := xadd(t, rdb, testStream, flatEvent("poison"))
	// A consumer that keeps crashing on the entry: each re-read of its
	// pending list is one more delivery.
	readAs(t, rdb, "crashy", ">")
	for range 5 {
		readAs(t, rdb, "crashy", "0")
	}
	healthy := xadd(t, rdb, testStream, flatEvent("healthy"))
	readAs(t, rdb, "crashy", ">")

	sink := newMemSink()
	opts := testOptions("live")
	opts.ClaimIdle = 10 * time.Millisecond
	opts.MaxDeliveries = 5
	time.Sleep(20 * time.Millisecond)
	c := newConsumer(t, rdb, sink, opts)
	start(t, c)

	waitFor(t, 10*time.Second, "healthy entry claimed and stored", func() bool { return sink.stored() == 1 })
	waitFor(t, 10*time.Second, "poison entry dead-lettered", func() bool { return streamLen(t, rdb, testStream+":dlq") == 1 })
	waitFor(t, 10*time.Second, "nothing pending", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })
	if f, ok := sink.record("healthy"); !ok || f.Source != "stream:"+healthy {
		t.Errorf("healthy decision = %+v, %v", f, ok)
	}
	letters, _, _, err := c.DeadLetters(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].OriginalID != poison || letters[0].Reason != "delivered 7 times, more than the limit of 5" {
		t.Errorf("dead letters = %+v, want %s delivered 7 times", letters, poison)
	}
}

// readAs reads one entry from the group as consumer, at id (">" for new,
// "0" for its pending list), the way a consumer that then dies would.
func readAs(t *testing.T, rdb redis.UniversalClient, consumer, id string) {
	t.Helper()
	err := rdb.XReadGroup(context.Background(), &redis.XReadGroupArgs{
		Group: DefaultGroup, Consumer: consumer, Streams: []string{testStream, id}, Count: 1, Block: -1,
	}).Err()
	if err != nil && err != redis.Nil {
		t.Fatalf("XREADGROUP as %s: %v", consumer, err)
	}
}

func TestClaimsAndStoresEntriesADeadConsumerLeftPending(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	if err := rdb.XGroupCreateMkStream(ctx, testStream, DefaultGroup, "0").Err(); err != nil {
		t.Fatal(err)
	}
	want := ids("d", 30)
	for _, id := range want {
		xadd(t, rdb, testStream, flatEvent(id))
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: DefaultGroup, Consumer: "dead", Streams: []string{testStream, ">"}, Count: 100, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	sink := newMemSink()
	opts := testOptions("live")
	opts.ClaimIdle = 100 * time.Millisecond
	opts.BatchSize = 7
	start(t, newConsumer(t, rdb, sink, opts))

	waitFor(t, 10*time.Second, "claimed entries stored", func() bool { return sink.stored() == len(want) })
	waitFor(t, 10*time.Second, "claimed entries acknowledged", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })
}

// TestAnotherReplicaTakesOverFromOneStoppedMidStore stops a consumer whose
// sink hangs: after StopTimeout it gives up without acknowledging, and a
// second replica claims and stores the entries.
func TestAnotherReplicaTakesOverFromOneStoppedMidStore(t *testing.T) {
	rdb := newRedis(t)
	want := ids("d", 10)
	for _, id := range want {
		xadd(t, rdb, testStream, flatEvent(id))
	}
	hung := newMemSink()
	hung.setBlock(make(chan struct{}))
	optsA := testOptions("a")
	optsA.StopTimeout = 50 * time.Millisecond
	optsA.ClaimIdle = time.Hour
	a := newConsumer(t, rdb, hung, optsA)
	stopA := start(t, a)
	<-hung.entered
	begin := time.Now()
	stopA()
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("stopping with a hung sink took %s, want about StopTimeout", d)
	}
	if n := pendingCount(t, rdb, testStream, DefaultGroup); n != int64(len(want)) {
		t.Fatalf("pending after the stop = %d, want %d", n, len(want))
	}

	sink := newMemSink()
	optsB := testOptions("b")
	optsB.ClaimIdle = 100 * time.Millisecond
	start(t, newConsumer(t, rdb, sink, optsB))
	waitFor(t, 10*time.Second, "entries taken over", func() bool { return sink.stored() == len(want) })
	waitFor(t, 10*time.Second, "entries acknowledged", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })
}

func TestRestartedConsumerFirstDrainsItsOwnPendingEntries(t *testing.T) {
	rdb := newRedis(t)
	want := ids("d", 12)
	for _, id := range want {
		xadd(t, rdb, testStream, flatEvent(id))
	}
	failing := newMemSink()
	failing.setFail(errSinkDown)
	opts := testOptions("c1")
	opts.ClaimIdle = time.Hour // no claiming: only the own pending list can bring them back
	opts.MaxDeliveries = 100
	stop := start(t, newConsumer(t, rdb, failing, opts))
	waitFor(t, 10*time.Second, "a failed store", func() bool { return failing.failureCount() > 0 })
	stop()
	if n := pendingCount(t, rdb, testStream, DefaultGroup); n != int64(len(want)) {
		t.Fatalf("pending after the first incarnation = %d, want %d", n, len(want))
	}

	sink := newMemSink()
	start(t, newConsumer(t, rdb, sink, opts))
	waitFor(t, 10*time.Second, "pending entries stored", func() bool { return sink.stored() == len(want) })
	waitFor(t, 10*time.Second, "pending entries acknowledged", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })
}

func TestStopFinishesBatchesInStoreAndAcksThem(t *testing.T) {
	rdb := newRedis(t)
	for _, id := range ids("d", 5) {
		xadd(t, rdb, testStream, flatEvent(id))
	}
	sink := newMemSink()
	release := make(chan struct{})
	sink.setBlock(release)
	opts := testOptions("c1")
	opts.StopTimeout = time.Minute
	c := newConsumer(t, rdb, sink, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-sink.entered
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while a batch was in Store", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the store finished")
	}
	if sink.stored() != 5 {
		t.Errorf("stored %d, want 5", sink.stored())
	}
	if n := pendingCount(t, rdb, testStream, DefaultGroup); n != 0 {
		t.Errorf("pending after a graceful stop = %d, want 0", n)
	}
}

func TestTwoConsumersShareTheGroupStoringEachDecisionOnce(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	const n = 2000
	want := ids("d", n)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range want {
			p.XAdd(ctx, &redis.XAddArgs{Stream: testStream, Values: flatEvent(id)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	shared := newMemSink()
	reg := prometheus.NewRegistry()
	var sinks []*countingSink
	for _, name := range []string{"replica-1", "replica-2"} {
		s := &countingSink{Sink: shared}
		sinks = append(sinks, s)
		opts := testOptions(name)
		opts.BatchSize = 50
		opts.Registerer = reg
		start(t, newConsumer(t, rdb, s, opts))
	}

	waitFor(t, 30*time.Second, "every decision stored", func() bool { return shared.stored() == n })
	waitFor(t, 30*time.Second, "every entry acknowledged", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })
	shared.mu.Lock()
	for _, id := range want {
		if got := shared.received[id]; got != 1 {
			t.Errorf("decision %s handed to the sink %d times, want 1", id, got)
		}
	}
	shared.mu.Unlock()
	for i, s := range sinks {
		if s.count() == 0 {
			t.Errorf("replica-%d stored nothing", i+1)
		}
	}
	if s1, s2 := sinks[0].count(), sinks[1].count(); s1+s2 != n {
		t.Errorf("replicas stored %d + %d, want %d", s1, s2, n)
	}
}

func TestDeadLettersPagesNewestFirst(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	var originals []string
	for i := range 7 {
		originals = append(originals, xadd(t, rdb, testStream, with(flatEvent(fmt.Sprintf("d-%d", i)), "decision", "MAYBE")))
	}
	c := newConsumer(t, rdb, newMemSink(), testOptions("c1"))
	start(t, c)
	waitFor(t, 10*time.Second, "dead letters", func() bool { return streamLen(t, rdb, testStream+":dlq") == 7 })

	var got []string
	token := ""
	for page := 0; ; page++ {
		letters, next, total, err := c.DeadLetters(ctx, 3, token)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if total != 7 {
			t.Errorf("page %d: total = %d, want 7", page, total)
		}
		if len(letters) > 3 {
			t.Fatalf("page %d has %d letters, want at most 3", page, len(letters))
		}
		for i, l := range letters {
			if i > 0 && compareIDs(l.ID, letters[i-1].ID) >= 0 {
				t.Errorf("page %d not newest first: %s after %s", page, l.ID, letters[i-1].ID)
			}
			got = append(got, l.OriginalID)
		}
		if next == "" {
			break
		}
		token = next
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	for i, id := range got {
		if want := originals[len(originals)-1-i]; id != want {
			t.Errorf("letter %d is for %s, want %s", i, id, want)
		}
	}
	if len(got) != 7 {
		t.Errorf("paged through %d letters, want 7", len(got))
	}

	if _, _, _, err := c.DeadLetters(ctx, 3, "not-a-token"); precept.ErrorCode(err) != precept.Invalid {
		t.Errorf("bad token: err = %v, want an invalid-argument error", err)
	}
}

func TestStatsReportLagPendingAndDeadLetters(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, testOptions("c1"))

	if s, err := c.Stats(ctx); err != nil || s != (Stats{Lag: -1}) {
		t.Errorf("Stats before the stream exists = %+v, %v; want lag -1", s, err)
	}
	xadd(t, rdb, testStream, flatEvent("d-1"))
	xadd(t, rdb, testStream, with(flatEvent("d-2"), "decision", "MAYBE"))
	stop := start(t, c)
	waitFor(t, 10*time.Second, "entries handled", func() bool {
		return sink.stored() == 1 && streamLen(t, rdb, testStream+":dlq") == 1
	})
	stop()
	for _, id := range ids("later", 3) {
		xadd(t, rdb, testStream, flatEvent(id))
	}
	s, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s != (Stats{Lag: 3, Pending: 0, DeadLetters: 1}) {
		t.Errorf("Stats = %+v, want lag 3, pending 0, dead letters 1", s)
	}

	if err := c.updateGauges(ctx); err != nil {
		t.Fatal(err)
	}
	if testValue(c.metrics.lag) != 3 || testValue(c.metrics.pending) != 0 || testValue(c.metrics.deadLetters) != 1 {
		t.Errorf("gauges lag, pending, dlq = %v, %v, %v; want 3, 0, 1",
			testValue(c.metrics.lag), testValue(c.metrics.pending), testValue(c.metrics.deadLetters))
	}
}

func TestRecreatesTheGroupWhenTheStreamIsDeleted(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, testOptions("c1"))
	xadd(t, rdb, testStream, flatEvent("before"))
	start(t, c)
	waitFor(t, 10*time.Second, "first decision", func() bool { return sink.stored() == 1 })
	if err := rdb.Del(ctx, testStream).Err(); err != nil {
		t.Fatal(err)
	}
	xadd(t, rdb, testStream, flatEvent("after"))
	waitFor(t, 15*time.Second, "decision after the stream was recreated", func() bool { return sink.stored() == 2 })
}

func TestRunRefusesKeysOfTheWrongType(t *testing.T) {
	tests := []struct {
		name, key, wantErr string
	}{
		{"stream key holds a string", testStream, "create consumer group"},
		{"dead-letter key holds a string", testStream + ":dlq", "key holds a string, not a stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := newRedis(t)
			if err := rdb.Set(context.Background(), tt.key, "x", 0).Err(); err != nil {
				t.Fatal(err)
			}
			c := newConsumer(t, rdb, newMemSink(), testOptions("c1"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := c.Run(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunWaitsForRedisToComeUp(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	c := newConsumer(t, rdb, newMemSink(), testOptions("c1"))
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run against an unreachable Redis = %v, want nil once cancelled", err)
	}
}

// TestWorksAgainstMiniredis pins the embedded default (docs/decisions/0007-embedded-miniredis.md):
// storing, dead-lettering and paging through miniredis.
func TestWorksAgainstMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, testOptions("c1"))
	xadd(t, rdb, testStream, flatEvent("d-1"))
	xadd(t, rdb, testStream, jsonEvent("d-2"))
	bad := with(flatEvent("d-3"), "rating", "great")
	badID := xadd(t, rdb, testStream, bad)
	start(t, c)

	waitFor(t, 10*time.Second, "decisions stored", func() bool { return sink.stored() == 2 })
	waitFor(t, 10*time.Second, "bad entry dead-lettered", func() bool { return streamLen(t, rdb, testStream+":dlq") == 1 })
	waitFor(t, 10*time.Second, "nothing pending", func() bool { return pendingCount(t, rdb, testStream, DefaultGroup) == 0 })
	letters, _, total, err := c.DeadLetters(context.Background(), 10, "")
	if err != nil || total != 1 || len(letters) != 1 {
		t.Fatalf("DeadLetters = %+v, %d, %v", letters, total, err)
	}
	if letters[0].OriginalID != badID || !strings.Contains(letters[0].Reason, "rating:") || len(letters[0].Fields) != len(bad)/2 {
		t.Errorf("dead letter = %+v", letters[0])
	}
	if _, err := c.Stats(context.Background()); err != nil {
		t.Errorf("Stats: %v", err)
	}
}

func TestLogsDeadLettersWithIDAndFieldsButNoValues(t *testing.T) {
	rdb := newRedis(t)
	var logs testenv.SyncBuffer
	opts := testOptions("c1")
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := newConsumer(t, rdb, newMemSink(), opts)
	id := xadd(t, rdb, testStream, with(with(flatEvent("d-1"), "decision", "SECRET-VERDICT"), "reviewer_comment", "SECRET-COMMENT\xff"))
	start(t, c)
	waitFor(t, 10*time.Second, "dead letter", func() bool { return streamLen(t, rdb, testStream+":dlq") == 1 })
	waitFor(t, 10*time.Second, "warning logged", func() bool { return strings.Contains(logs.String(), "dead-lettered") })

	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, id) || !strings.Contains(out, "decision") || !strings.Contains(out, "reviewer_comment") {
		t.Errorf("log does not give level, entry id and fields:\n%s", out)
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("log contains a field value:\n%s", out)
	}
}

func TestRegistersMetricsUnderPreceptNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := testOptions("c1")
	opts.Registerer = reg
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	newConsumer(t, rdb, newMemSink(), opts)
	// A second consumer in the process shares the collectors.
	opts.Consumer = "c2"
	newConsumer(t, rdb, newMemSink(), opts)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]bool)
	for _, f := range families {
		got[f.GetName()] = true
	}
	for _, name := range []string{
		"precept_stream_decisions_total", "precept_stream_lag", "precept_stream_pending",
		"precept_stream_dlq_length", "precept_stream_store_seconds",
	} {
		if !got[name] {
			t.Errorf("metric %s not registered (have %v)", name, got)
		}
	}
}
