package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/lib/testenv"
)

// startAt runs a preceptd in-process on a given data directory and Redis
// server, so a test can stop it and start it again on what is left.
func startAt(t *testing.T, dataDir, redisAddr, yaml string) *running {
	t.Helper()
	return launch(t, dataDir, redisAddr, "{batch_wait: 5ms, fsync: false, follow_interval: 100ms}", yaml)
}

// clarificationState is what the API says about one clarified decision.
type clarificationState struct {
	class   preceptv1.Classification
	pending []string
}

func readClarificationState(t *testing.T, r *running, id string) (clarificationState, bool) {
	t.Helper()
	c := evaluatorClient(r.app.URL(), "connect")
	ev, err := c.GetEvaluation(context.Background(), connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: id}))
	if err != nil {
		return clarificationState{}, false
	}
	review, err := c.ListNeedsReview(context.Background(), connect.NewRequest(&preceptv1.ListNeedsReviewRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	st := clarificationState{class: ev.Msg.GetEvaluation().GetClassification()}
	for _, it := range review.Msg.GetItems() {
		st.pending = append(st.pending, fmt.Sprintf("%s %s attempts=%d replies=%d", it.GetDecisionId(), it.GetStatus(), it.GetAttempts(), len(it.GetReplies())))
	}
	return st, true
}

// A reply that reclassified a decision is part of the feedback
// repository: with Redis flushed and the replica's local state deleted,
// preceptd rebuilds the same classification and review queue from git.
func TestAClarifiedDecisionSurvivesLosingRedisAndTheReplicaState(t *testing.T) {
	ws := fakeslack.New(t)
	redisAddr := testenv.Redis(t)
	dataDir := t.TempDir()
	yaml := slackYAML(ws, "  clarification: {scan_interval: 200ms}\nfeatures: {clarification: true}\n")
	r := startAt(t, dataDir, redisAddr, yaml)
	xaddAll(t, r.rdb, []map[string]any{
		event("vague-1", "reviewer_id", "vic", "reviewer_comment", "fix this"),
		event("vague-2", "reviewer_id", "vic", "reviewer_comment", "wrong"),
	})
	questions := map[string]fakeslack.Message{}
	eventually(t, "the clarification questions", 20*time.Second, func() bool {
		for _, m := range ws.TopLevel(slackChannel) {
			for _, id := range []string{"vague-1", "vague-2"} {
				if strings.Contains(m.Text, "`"+id+"`") {
					questions[id] = m
				}
			}
		}
		return len(questions) == 2
	})
	eventually(t, "the questions to be recorded", 20*time.Second, func() bool {
		st, ok := readClarificationState(t, r, "vague-1")
		return ok && len(st.pending) == 2 && strings.Contains(st.pending[0], "attempts=1") && strings.Contains(st.pending[1], "attempts=1")
	})
	reply := func(id, text string) {
		t.Helper()
		m := ws.Reply(slackChannel, questions[id].TS, "U0VIC", text)
		ev := map[string]any{"type": "event_callback", "event_id": "Ev-" + m.TS, "event": map[string]any{
			"type": "message", "channel": slackChannel, "user": "U0VIC", "text": m.Text, "ts": m.TS, "thread_ts": questions[id].TS,
		}}
		if code, body := postSigned(t, fakeslack.Event(r.app.URL()+"/slack/events", slackSecret, time.Now(), ev)); code != 200 {
			t.Fatalf("event = %d %q", code, body)
		}
	}
	// vague-1 is clarified; vague-2 gets a vague answer and stays open.
	reply("vague-1", "The retry helper in retry.go has no unit tests; add table tests because regressions slip through.")
	reply("vague-2", "redo it")
	var before clarificationState
	eventually(t, "the clarified decision and the follow-up question", 20*time.Second, func() bool {
		st, ok := readClarificationState(t, r, "vague-1")
		before = st
		return ok && st.class != preceptv1.Classification_CLASSIFICATION_AMBIGUOUS &&
			len(st.pending) == 1 && strings.Contains(st.pending[0], "attempts=2 replies=1")
	})
	questionsBefore := len(ws.TopLevel(slackChannel))
	r.stop()

	// Lose everything but the repositories.
	if err := r.rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dataDir, "nodes", "test-node")); err != nil {
		t.Fatal(err)
	}
	r = startAt(t, dataDir, redisAddr, yaml)
	var after clarificationState
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, ok := readClarificationState(t, r, "vague-1")
		after = st
		if ok && st.class == before.class && strings.Join(st.pending, "\n") == strings.Join(before.pending, "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after losing Redis and the local state: %v %q; before: %v %q", after.class, after.pending, before.class, before.pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Give the clarification loop a few scans: it must not ask again.
	time.Sleep(time.Second)
	if n := len(ws.TopLevel(slackChannel)); n != questionsBefore {
		t.Fatalf("%d questions in the channel after the restart, %d before", n, questionsBefore)
	}
}
