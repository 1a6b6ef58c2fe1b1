package slackapp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/lib/testenv"
)

// An upgrade keeps the conversations an older precept kept in Redis: at
// start they move into the feedback repository, leave Redis, and carry
// on where they stood.
func TestConversationsAnOlderPreceptKeptInRedisMoveToGitAtStart(t *testing.T) {
	rdb := testenv.RedisClient(t, testenv.Redis(t))
	const prefix = "precept:slack:"
	clk := newClock()
	r := newClarifyEnv(t, envConfig{noRun: true, store: NewRedisStore(rdb, prefix)})
	ctx := context.Background()
	r.add(negative("v", "vic", vagueComment, clk.Now()), negative("w", "vic", "wrong", clk.Now()))
	r.drain()

	// What the older precept left: v was asked twice and answered once; of
	// w only the reply log and the thread survived.
	_, rootV, err := r.ws.Client().PostMessage(testChannel, slack.MsgOptionText("question about v", false))
	if err != nil {
		t.Fatal(err)
	}
	threadV, threadW := testChannel+":"+rootV, testChannel+":1700000000.000009"
	conv, _ := json.Marshal(map[string]any{"thread": threadV, "attempts": 2, "asked_at": r.clock.Now(), "status": evaluator.PendingClarification})
	set := func(key, value string) {
		if err := rdb.Set(ctx, prefix+key, value, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	push := func(key string, replies ...map[string]any) {
		for _, rep := range replies {
			b, _ := json.Marshal(rep)
			if err := rdb.RPush(ctx, prefix+key, b).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	set("conversation:v", string(conv))
	set("thread:"+threadV, "v")
	push("replies:v", map[string]any{"ts": "1700000000.000100", "user": uVic, "text": "redo it please"})
	set("thread:"+threadW, "w")
	push("replies:w", map[string]any{"ts": "1700000000.000200", "user": uVic, "text": "meh"}, map[string]any{"ts": "1700000000.000300", "user": uVic, "text": "later", "absorb": true})
	set("seen:abc", "1") // not a conversation: stays

	// preceptd starts.
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { r.svc.Run(runCtx); close(stopped) }()
	defer func() { stop(); <-stopped }()
	legacyKeys := func() []string {
		var out []string
		for _, pattern := range []string{"conversation:*", "replies:*", "thread:*"} {
			keys, err := rdb.Keys(ctx, prefix+pattern).Result()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, keys...)
		}
		return out
	}
	eventually(t, "the import", func() bool { return len(legacyKeys()) == 0 })
	r.drain()

	v, err := r.fb.Clarification(ctx, "v")
	if err != nil || v.Thread != threadV || v.Attempts() != 2 || len(v.Replies) != 1 || v.Replies[0].Text != "redo it please" || !v.LastAsked().Equal(r.clock.Now()) {
		t.Fatalf("v's record = %+v, %v", v, err)
	}
	w, err := r.fb.Clarification(ctx, "w")
	if err != nil || w.Thread != threadW || len(w.Replies) != 2 || !w.Replies[1].Absorbed || w.Status != evaluator.PendingClarification {
		t.Fatalf("w's record = %+v, %v", w, err)
	}
	if nr := r.review("v"); nr.Thread != threadV || nr.Attempts != 2 || len(nr.Replies) != 1 || nr.Status != evaluator.PendingClarification {
		t.Fatalf("v's review after the import = %+v", nr)
	}
	if nr := r.review("w"); len(nr.Replies) != 2 || nr.Replies[1] != "later" {
		t.Fatalf("w's review after the import = %+v", nr)
	}
	if n, err := rdb.Exists(ctx, prefix+"seen:abc").Result(); err != nil || n != 1 {
		t.Fatalf("the import deleted a key that is no conversation: %v, %v", n, err)
	}

	// The conversation goes on from git: the next vague reply gets the
	// third and last question.
	eventually(t, "the import to be logged", func() bool {
		return strings.Contains(r.logs.String(), "imported clarification conversations from Redis into the feedback repository")
	})
	r.reply(testChannel, rootV, uVic, "nope")
	bots := r.bots(testChannel, rootV)
	if len(bots) != 1 || !strings.Contains(bots[0].Text, "Question 3 of 3") {
		t.Fatalf("thread = %+v", bots)
	}
	// A second start finds nothing more to import.
	before := r.logs.String()
	r.svc.clarify.importLegacy(ctx)
	if strings.Count(r.logs.String(), "imported clarification") != strings.Count(before, "imported clarification") {
		t.Fatal("imported again")
	}
	// Nor does it scan Redis again: a conversation key appearing now
	// (there is no older precept left to write one) stays where it is.
	set("conversation:x", string(conv))
	r.svc.clarify.importLegacy(ctx)
	if n, err := rdb.Exists(ctx, prefix+"conversation:x").Result(); err != nil || n != 1 {
		t.Fatalf("a later start scanned Redis for conversations again: %v, %v", n, err)
	}
}
