package evaluator

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// addConversation appends a clarification record to the feed.
func (f *memFeed) addConversation(c Conversation) {
	f.mu.Lock()
	f.items = append(f.items, Item{Seq: uint64(len(f.items) + 1), Conversation: &c})
	close(f.ch)
	f.ch = make(chan struct{})
	f.mu.Unlock()
}

func TestConversationsInTheFeedClarifyDecisionsWhereTheyStand(t *testing.T) {
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{BatchSize: 2})
	ctx := context.Background()
	at := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	feed.add(neg("a", "alice", "E1", "The HTTP client has no timeout and can hang forever; set one."),
		neg("v", "vic", "E3", "fix this"),
		neg("w", "wes", "E4", "wrong"))
	conv := Conversation{DecisionID: "v", Thread: "C1:1.0", Attempts: 1, AskedAt: at, Status: PendingClarification}
	feed.addConversation(conv)
	conv.Attempts, conv.Replies = 2, []ConversationReply{{Text: "redo it please", At: at.Add(time.Minute)}}
	feed.addConversation(conv)
	conv.Replies = append(conv.Replies, ConversationReply{Text: "The retry loop has no timeout either and hangs forever; set a timeout on the HTTP client.", At: at.Add(2 * time.Minute)})
	feed.addConversation(conv)
	// The same record again, and with a reply after the one that resolved
	// it: nothing changes.
	feed.addConversation(conv)
	conv.Replies = append(conv.Replies, ConversationReply{Text: "one more thing", At: at.Add(3 * time.Minute)})
	feed.addConversation(conv)
	// w is left for human review; a later reply is only kept.
	feed.addConversation(Conversation{DecisionID: "w", Thread: "C1:2.0", Attempts: 3, AskedAt: at, Status: NeedsHumanReview,
		Replies: []ConversationReply{{Text: "the export is broken", At: at.Add(time.Hour), Absorbed: true}}})
	// A record of a decision that waits for no review changes nothing.
	feed.addConversation(Conversation{DecisionID: "a", Replies: []ConversationReply{{Text: "?"}}})
	// And decisions after the records are evaluated as usual.
	feed.add(neg("b", "bob", "E2", "Set a timeout on the http client, requests hang indefinitely without it."))
	e.drain(t)

	v, err := e.svc.Review(ctx, "v")
	if err != nil || v.Status != Resolved || v.Thread != "C1:1.0" || v.Attempts != 2 || len(v.Replies) != 2 || !v.UpdatedAt.Equal(at.Add(2*time.Minute)) {
		t.Fatalf("v = %+v, %v", v, err)
	}
	// Revised by each of its two replies, then when b made its cluster
	// generalizable.
	ev, _, err := e.svc.Evaluation(ctx, "v")
	if err != nil || ev.Class != GeneralizableHigh || ev.ClusterID != clusterID("a") || ev.Revision != 3 {
		t.Fatalf("v's evaluation = %+v, %v", ev, err)
	}
	// b came after v's clarification: it finds a cluster of two.
	if b, _, _ := e.svc.Evaluation(ctx, "b"); b.ClusterID != clusterID("a") || b.Stats == nil || b.Stats.Size != 3 {
		t.Fatalf("b's evaluation = %+v", b)
	}
	w, err := e.svc.Review(ctx, "w")
	if err != nil || w.Status != NeedsHumanReview || w.Attempts != 3 || !reflect.DeepEqual(w.Replies, []string{"the export is broken"}) {
		t.Fatalf("w = %+v, %v", w, err)
	}
	if ev, _, _ := e.svc.Evaluation(ctx, "w"); ev.Revision != 0 || ev.Class != Ambiguous {
		t.Fatalf("an absorbed reply was evaluated: %+v", ev)
	}
	if _, err := e.svc.Review(ctx, "a"); err == nil {
		t.Fatal("a record created a review item")
	}
	if pos, _, _ := e.svc.state.position(); pos != uint64(len(feed.items)) {
		t.Fatalf("position %d of %d", pos, len(feed.items))
	}
}

func TestCatchUpStopsAtWhatTheFeedHeldWhenItWasCalled(t *testing.T) {
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{BatchSize: 1})
	feed.add(neg("a", "alice", "E1", "The HTTP client has no timeout and can hang forever; set one."),
		neg("b", "bob", "E2", "Set a timeout on the http client, requests hang indefinitely without it."))
	// Decisions keep arriving while CatchUp works: one per read of the
	// feed.
	added := 0
	feed.onSince = func() {
		added++
		feed.items = append(feed.items, Item{Seq: uint64(len(feed.items) + 1),
			Feedback: neg(fmt.Sprintf("x%d", added), "carol", "E3", "Wrap errors from the retry loop with the attempt count.")})
	}
	if err := e.svc.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pos, _, _ := e.svc.state.position(); pos != 2 {
		t.Fatalf("CatchUp went to %d; the feed held 2 when it was called", pos)
	}
}
