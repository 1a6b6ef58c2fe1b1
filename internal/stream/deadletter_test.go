package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/testenv"
)

func TestAReusedDecisionIDWithOtherContentIsDeadLettered(t *testing.T) {
	rdb := newRedis(t)
	var logs testenv.SyncBuffer
	opts := testOptions("c1")
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, opts)
	xadd(t, rdb, testStream, flatEvent("same"))
	// The same decision again, in the other encoding: a redelivery.
	xadd(t, rdb, testStream, jsonEvent("same"))
	reused := xadd(t, rdb, testStream, with(flatEvent("same"), "reviewer_comment", "Something else entirely."))
	start(t, c)

	waitFor(t, 10*time.Second, "every entry handled", func() bool {
		return counter(c, resultStored)+counter(c, resultDuplicate)+counter(c, resultDeadLetter) == 3 && pendingCount(t, rdb, testStream, DefaultGroup) == 0
	})
	if counter(c, resultStored) != 1 || counter(c, resultDuplicate) != 1 || counter(c, resultDeadLetter) != 1 {
		t.Errorf("stored, duplicate, dead_letter = %v, %v, %v; want 1 each", counter(c, resultStored), counter(c, resultDuplicate), counter(c, resultDeadLetter))
	}
	letters, _, total, err := c.DeadLetters(context.Background(), 10, "")
	if err != nil || total != 1 || len(letters) != 1 {
		t.Fatalf("DeadLetters = %+v, %d, %v; want one", letters, total, err)
	}
	if l := letters[0]; l.OriginalID != reused || l.Reason != "decision_id reused with different content" {
		t.Errorf("dead letter for %s: %q", l.OriginalID, l.Reason)
	}
	if f, _ := sink.record("same"); f.ReviewerComment == "Something else entirely." {
		t.Error("the second version replaced the first")
	}
	out := logs.String()
	if !strings.Contains(out, "decision_id reused with different content") || !strings.Contains(out, "decision_id=same") || !strings.Contains(out, reused) {
		t.Errorf("the reuse is not logged with the decision and entry ids:\n%s", out)
	}
	if strings.Contains(out, "Something else") {
		t.Errorf("the log quotes a value:\n%s", out)
	}
}

// rawDeadLetters reads the dead-letter stream as Redis holds it.
func rawDeadLetters(t *testing.T, rdb redis.UniversalClient) []rawEntry {
	t.Helper()
	reply, err := rdb.Do(context.Background(), "XRANGE", testStream+DeadLetterSuffix, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parseEntries(reply)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func entryBytes(fields []RawField) int {
	n := 0
	for _, f := range fields {
		n += len(f.Name) + len(f.Value)
	}
	return n
}

// netstringSHA256 is the documented hash of an entry's fields.
func netstringSHA256(pairs ...string) string {
	var b strings.Builder
	for _, p := range pairs {
		fmt.Fprintf(&b, "%d:%s,", len(p), p)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

func TestOversizedEntriesAreDeadLetteredTruncatedWithTheirSizeAndHash(t *testing.T) {
	rdb := newRedis(t)
	opts := testOptions("c1")
	opts.BatchSize = 2
	c := newConsumer(t, rdb, newMemSink(), opts)
	const n, size = 10, 4 << 20
	big := strings.Repeat("é", size/2) // 4 MiB of two-byte runes
	for i := range n {
		xadd(t, rdb, testStream, []any{"data", strconv.Itoa(i) + big})
	}
	start(t, c)
	waitFor(t, 30*time.Second, "every entry dead-lettered", func() bool { return streamLen(t, rdb, testStream+DeadLetterSuffix) == n })

	// What Redis keeps: the bound and a little bookkeeping, not 4 MiB.
	for _, e := range rawDeadLetters(t, rdb) {
		if got := entryBytes(e.fields); got > DefaultDeadLetterMaxBytes+2048 {
			t.Errorf("dead letter %s holds %d bytes, want at most %d and its bookkeeping", e.id, got, DefaultDeadLetterMaxBytes)
		}
	}
	letters, next, total, err := c.DeadLetters(context.Background(), 1000, "")
	if err != nil || next != "" || total != n || len(letters) != n {
		t.Fatalf("DeadLetters = %d letters, %q, %d, %v", len(letters), next, total, err)
	}
	listed := 0
	for _, l := range letters {
		listed += entryBytes(l.Fields) + len(l.Reason)
		i, _ := strconv.Atoi(string(l.Fields[0].Value[:1]))
		value := strconv.Itoa(i) + big
		if !l.Truncated || l.Whole || l.OriginalBytes != int64(len("data")+len(value)) || l.OriginalFields != 1 || l.OriginalSHA256 != netstringSHA256("data", value) {
			t.Errorf("letter %s: truncated %v, whole %v, %d bytes in %d fields, sha256 %s", l.ID, l.Truncated, l.Whole, l.OriginalBytes, l.OriginalFields, l.OriginalSHA256)
		}
		if v := l.Fields[0].Value; !utf8.Valid(v) || len(v) > DefaultDeadLetterMaxBytes-len("data") || !strings.HasPrefix(value, string(v)) {
			t.Errorf("letter %s keeps %d bytes, valid UTF-8 %v", l.ID, len(v), utf8.Valid(v))
		}
		if !strings.Contains(l.Reason, "event: 4194309 bytes, more than the limit") {
			t.Errorf("reason %q", l.Reason)
		}
	}
	if listed > n*(DefaultDeadLetterMaxBytes+1024) {
		t.Errorf("the listing carries %d bytes", listed)
	}
}

func TestDeadLetterPagesAreCappedInBytes(t *testing.T) {
	rdb := newRedis(t)
	opts := testOptions("c1")
	opts.Limits.MaxEventBytes = 64 << 10
	opts.DeadLetterMaxBytes = 1 << 20 // whole entries of 900 KiB
	c := newConsumer(t, rdb, newMemSink(), opts)
	const n = 10
	for i := range n {
		xadd(t, rdb, testStream, []any{"data", strings.Repeat(string(rune('a'+i)), 900<<10)})
	}
	start(t, c)
	waitFor(t, 30*time.Second, "every entry dead-lettered", func() bool { return streamLen(t, rdb, testStream+DeadLetterSuffix) == n })

	seen := map[string]bool{}
	token := ""
	for page := 0; ; page++ {
		letters, next, _, err := c.DeadLetters(context.Background(), 1000, token)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, l := range letters {
			size += entryBytes(l.Fields) + len(l.Reason)
			if l.Truncated || !l.Whole || seen[l.ID] {
				t.Errorf("letter %s: truncated %v, whole %v, seen before %v", l.ID, l.Truncated, l.Whole, seen[l.ID])
			}
			seen[l.ID] = true
		}
		if size > maxDeadLetterListBytes || len(letters) == 0 {
			t.Fatalf("page %d: %d letters of %d bytes", page, len(letters), size)
		}
		if next == "" {
			break
		}
		token = next
	}
	if len(seen) != n {
		t.Fatalf("paged through %d letters, want %d", len(seen), n)
	}
}

func TestTheDeadLetterStreamIsTrimmedByLengthAndAge(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	dlq := testStream + DeadLetterSuffix
	// Two dead letters from 40 days ago, as a consumer wrote them then.
	old := time.Now().Add(-40 * 24 * time.Hour).UnixMilli()
	for i := range 2 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: dlq, ID: fmt.Sprintf("%d-%d", old, i), Values: []any{dlqReason, "old", "field:decision_id", "x"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	opts := testOptions("c1")
	opts.DeadLetterMaxLen = 5
	opts.DeadLetterMaxAge = 30 * 24 * time.Hour
	c := newConsumer(t, rdb, newMemSink(), opts)
	var bad []string
	for i := range 8 {
		bad = append(bad, xadd(t, rdb, testStream, with(flatEvent(fmt.Sprintf("d-%d", i)), "decision", "MAYBE")))
	}
	start(t, c)
	waitFor(t, 10*time.Second, "every bad entry handled", func() bool { return counter(c, resultDeadLetter) == 8 })
	waitFor(t, 10*time.Second, "the old dead letters trimmed", func() bool {
		for _, e := range rawDeadLetters(t, rdb) {
			if compareIDs(e.id, fmt.Sprintf("%d-9", old)) <= 0 {
				return false
			}
		}
		return true
	})
	entries := rawDeadLetters(t, rdb)
	if len(entries) != 5 {
		t.Fatalf("%d dead letters kept, want 5", len(entries))
	}
	for i, e := range entries {
		if l := parseDeadLetter(e); l.OriginalID != bad[3+i] {
			t.Errorf("dead letter %d is for %s, want the newest five (%s)", i, l.OriginalID, bad[3+i])
		}
	}
}

func TestReplayReingestsAFixedEntryAndDropRemovesOneBothAudited(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	var logs testenv.SyncBuffer
	// HITL-9 maps to no agent yet: its decision is dead-lettered.
	opts := testOptions("c1")
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, opts)
	unmapped := without(with(flatEvent("needs-agent"), "gate_id", "HITL-9"), "agent")
	xadd(t, rdb, testStream, unmapped)
	xadd(t, rdb, testStream, with(flatEvent("hopeless"), "decision", "MAYBE"))
	xadd(t, rdb, testStream, []any{"data", strings.Repeat("x", 2<<20)})
	stop := start(t, c)
	waitFor(t, 10*time.Second, "three dead letters", func() bool { return streamLen(t, rdb, testStream+DeadLetterSuffix) == 3 })
	stop()
	letters, _, _, err := c.DeadLetters(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	byReason := func(s string) DeadLetter {
		for _, l := range letters {
			if strings.Contains(l.Reason, s) {
				return l
			}
		}
		t.Fatalf("no dead letter says %q", s)
		return DeadLetter{}
	}
	fixable, hopeless, truncated := byReason("agent: required"), byReason("decision: must be"), byReason("bytes, more than")

	// The operator maps the gate and restarts.
	opts.Limits.GateAgents = map[string]string{"HITL-9": "coder"}
	c = newConsumer(t, rdb, sink, opts)
	start(t, c)
	out, err := c.ReplayDeadLetters(ctx, []string{fixable.ID, truncated.ID}, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil || out[0].StreamID == "" {
		t.Fatalf("replay of %s = %+v", fixable.ID, out[0])
	}
	if precept.ErrorCode(out[1].Err) != precept.FailedPrecondition || !strings.Contains(out[1].Err.Error(), "truncated") {
		t.Fatalf("replay of the truncated %s = %+v", truncated.ID, out[1])
	}
	waitFor(t, 10*time.Second, "the replayed decision stored", func() bool { _, ok := sink.record("needs-agent"); return ok })
	if f, _ := sink.record("needs-agent"); f.Agent != "coder" || f.Source != "stream:"+out[0].StreamID {
		t.Errorf("stored %+v", f)
	}
	// Replaying it again finds nothing: it left the dead-letter stream.
	if again, err := c.ReplayDeadLetters(ctx, []string{fixable.ID}, "ops"); err != nil || precept.ErrorCode(again[0].Err) != precept.NotFound {
		t.Fatalf("second replay = %+v, %v", again, err)
	}

	dropped, err := c.DropDeadLetters(ctx, []string{hopeless.ID, truncated.ID}, "ops")
	if err != nil || dropped[0].Err != nil || dropped[1].Err != nil {
		t.Fatalf("drop = %+v, %v", dropped, err)
	}
	if n := streamLen(t, rdb, testStream+DeadLetterSuffix); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
	audit, err := rdb.XRange(ctx, testStream+DeadLetterSuffix+AuditSuffix, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range audit {
		got = append(got, fmt.Sprintf("%s %s by %s (%s)", a.Values["action"], a.Values["dead_letter_id"], a.Values["by"], a.Values["original_id"]))
	}
	want := []string{
		fmt.Sprintf("replay %s by ops (%s)", fixable.ID, fixable.OriginalID),
		fmt.Sprintf("drop %s by ops (%s)", hopeless.ID, hopeless.OriginalID),
		fmt.Sprintf("drop %s by ops (%s)", truncated.ID, truncated.OriginalID),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit stream:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, line := range []string{"dead letter replayed", "dead letter dropped", "by=ops", "dead_letter_id=" + hopeless.ID} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q", line)
		}
	}

	for _, bad := range [][]string{nil, {"12"}, {"nope"}, {fixable.ID, fixable.ID}} {
		if _, err := c.DropDeadLetters(ctx, bad, "ops"); precept.ErrorCode(err) != precept.Invalid {
			t.Errorf("drop %q: err = %v, want invalid", bad, err)
		}
	}
}

func TestAnEntryDeadLetteredBeforeTheBoundIsListedCutAndReplayedWhole(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	dlq := testStream + DeadLetterSuffix
	value := strings.Repeat("y", 300<<10)
	// The layout of an older consumer: no size, no hash, every byte.
	id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: dlq, Values: []any{
		dlqReason, "event: too big", dlqOriginalID, "1-1", dlqStream, testStream, dlqConsumer, "old", "field:data", value,
	}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions("c1")
	opts.Limits.MaxEventBytes = 1 << 20
	sink := newMemSink()
	c := newConsumer(t, rdb, sink, opts)
	letters, _, _, err := c.DeadLetters(ctx, 10, "")
	if err != nil || len(letters) != 1 {
		t.Fatalf("DeadLetters = %+v, %v", letters, err)
	}
	l := letters[0]
	if !l.Truncated || !l.Whole || l.OriginalBytes != int64(4+len(value)) || l.OriginalSHA256 != netstringSHA256("data", value) || entryBytes(l.Fields) > DefaultDeadLetterMaxBytes {
		t.Fatalf("listed: truncated %v whole %v, %d bytes, %s, %d bytes shown", l.Truncated, l.Whole, l.OriginalBytes, l.OriginalSHA256, entryBytes(l.Fields))
	}
	out, err := c.ReplayDeadLetters(ctx, []string{id}, "ops")
	if err != nil || out[0].Err != nil {
		t.Fatalf("replay = %+v, %v", out, err)
	}
	entries, err := rdb.XRange(ctx, testStream, out[0].StreamID, out[0].StreamID).Result()
	if err != nil || len(entries) != 1 || entries[0].Values["data"] != value {
		t.Fatalf("the replayed entry is not the original, byte for byte (%v)", err)
	}
}

func TestDeadLetterAdministrationWorksAgainstMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	opts := testOptions("c1")
	opts.DeadLetterMaxLen = 1
	c := newConsumer(t, rdb, newMemSink(), opts)
	xadd(t, rdb, testStream, with(flatEvent("d-1"), "decision", "MAYBE"))
	xadd(t, rdb, testStream, with(flatEvent("d-2"), "decision", "MAYBE"))
	start(t, c)
	waitFor(t, 10*time.Second, "both dead-lettered", func() bool { return counter(c, resultDeadLetter) == 2 })
	if _, err := c.trimDeadLetters(ctx); err != nil {
		t.Fatal(err)
	}
	letters, _, total, err := c.DeadLetters(ctx, 10, "")
	if err != nil || total != 1 || len(letters) != 1 {
		t.Fatalf("DeadLetters = %d of %d, %v", len(letters), total, err)
	}
	out, err := c.ReplayDeadLetters(ctx, []string{letters[0].ID}, "ops")
	if err != nil || out[0].Err != nil || out[0].StreamID == "" {
		t.Fatalf("replay = %+v, %v", out, err)
	}
	waitFor(t, 10*time.Second, "dead-lettered again", func() bool { return counter(c, resultDeadLetter) == 3 })
	letters, _, _, err = c.DeadLetters(ctx, 10, "")
	if err != nil || len(letters) != 1 {
		t.Fatalf("DeadLetters = %+v, %v", letters, err)
	}
	if out, err := c.DropDeadLetters(ctx, []string{letters[0].ID}, "ops"); err != nil || out[0].Err != nil {
		t.Fatalf("drop = %+v, %v", out, err)
	}
	if n := streamLen(t, rdb, testStream+DeadLetterSuffix+AuditSuffix); n != 2 {
		t.Fatalf("%d audit records, want 2", n)
	}
}
