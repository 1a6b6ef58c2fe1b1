package stream

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/internal/testenv"
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
