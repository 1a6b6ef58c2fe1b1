package slackapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/chromem"
)

func negative(id, reviewer, comment string, at time.Time) precept.Feedback {
	d := precept.Decision{
		DecisionID: id, GateID: "HITL-2", EpicID: "EPIC-3", Agent: "coding-agent", Decision: precept.Rejected,
		ReviewerID: reviewer, Timestamp: at, ReviewerComment: comment,
	}
	if err := d.Validate(precept.Limits{}, at); err != nil {
		panic(err)
	}
	return precept.NewFeedback(d, "test", at)
}

// replica is one preceptd's feedback store, evaluator and Slack app.
type replica struct {
	*env
	fb   *feedbackstore.Store
	ev   *evaluator.Service
	clar *clarification.Service
}

// openFeedbackRepo opens a feedback repository for replicas to share.
func openFeedbackRepo(t *testing.T) *gitrepo.Repo {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	return repo
}

// newReplica starts a feedback store (on cfg.feedbackRepo, or a fresh
// repository) and an evaluator whose changes reach a Slack app with
// clarification on.
func newReplica(t *testing.T, cfg envConfig, clk *testenv.Clock) *replica {
	t.Helper()
	dir := t.TempDir()
	repo := cfg.feedbackRepo
	if repo == nil {
		repo = openFeedbackRepo(t)
	}
	fb, err := feedbackstore.Open(repo, filepath.Join(dir, "feedback.db"), feedbackstore.Options{BatchWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fb.Close() })
	emb := embedding.NewLocal(embedding.LocalOptions{})
	idx, reset, err := chromem.Open(filepath.Join(dir, "vectors"), vectorindex.Spec{Embedder: emb.Name(), Dimension: emb.Dimension()})
	if err != nil {
		t.Fatal(err)
	}
	var svc atomic.Pointer[Service]
	now := time.Now
	if clk != nil {
		now = clk.Now
	}
	ev, err := evaluator.New(context.Background(), evaluator.FeedFrom(fb), emb, idx, reset, filepath.Join(dir, "evaluator.db"), evaluator.Options{
		Now: now,
		OnChange: func(c evaluator.Change) {
			if s := svc.Load(); s != nil {
				s.EvaluatorChanged(c)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close(); idx.Close() })
	clar := clarification.New(fb, ev, cfg.clarify, nil)
	cfg.clar = clar
	if cfg.opts.Features == nil {
		cfg.opts.Features = &Features{Posting: true, Clarification: true}
	}
	if cfg.opts.Reviewers == nil {
		cfg.opts.Reviewers = map[string]string{"vic": uVic}
	}
	if cfg.opts.ScanInterval == 0 {
		cfg.opts.ScanInterval = time.Hour
	}
	e := newEnv(t, cfg)
	if clk != nil {
		e.clock = clk
	}
	svc.Store(e.svc)
	return &replica{env: e, fb: fb, ev: ev, clar: clar}
}

// newClarifyEnv is one replica with the shared fake clock.
func newClarifyEnv(t *testing.T, cfg envConfig) *replica {
	t.Helper()
	clk := newClock()
	cfg.opts.Now = clk.Now
	if cfg.store == nil {
		cfg.store = NewMemoryStore(clk.Now)
	}
	return newReplica(t, cfg, clk)
}

// add stores decisions in the replica's feedback store.
func (r *replica) add(fb ...precept.Feedback) {
	r.t.Helper()
	if _, err := r.fb.Store(context.Background(), fb); err != nil {
		r.t.Fatal(err)
	}
}

// drain evaluates everything in the feedback store, including what
// other replicas committed.
func (r *replica) drain() {
	r.t.Helper()
	if _, err := r.fb.CatchUp(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	if err := r.ev.CatchUp(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *replica) review(id string) evaluator.NeedsReview {
	r.t.Helper()
	nr, err := r.ev.Review(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return nr
}

// asked waits for the first question about a decision and returns the
// thread's channel and root.
func (r *replica) asked(id string) (string, string) {
	r.t.Helper()
	var nr evaluator.NeedsReview
	eventually(r.t, "the clarification question", func() bool {
		nr = r.review(id)
		return nr.Thread != ""
	})
	ch, root, _ := strings.Cut(nr.Thread, ":")
	return ch, root
}

var eventSeq atomic.Int64

// reply types a reply in the thread and delivers its event; it waits
// for the work the event started.
func (r *replica) reply(channel, root, user, text string) fakeslack.Message {
	r.t.Helper()
	m := r.ws.Reply(channel, root, user, text)
	code, body := r.event(messageEvent(channel, root, m.TS, user, text), nil)
	if code != http.StatusOK {
		r.t.Fatalf("event answered %d %q", code, body)
	}
	r.svc.wait()
	return m
}

// event sends a signed Events API request.
func (r *replica) event(ev map[string]any, header http.Header) (int, string) {
	r.t.Helper()
	req := fakeslack.Event("http://app/slack/events", testSecret, r.clock.Now(), ev)
	for k, v := range header {
		req.Header[k] = v
	}
	return r.do(req)
}

func messageEvent(channel, root, ts, user, text string) map[string]any {
	return map[string]any{
		"type": "event_callback", "team_id": "T0PRECEPT", "api_app_id": "A0PRECEPT",
		"event_id": fmt.Sprintf("Ev%06d", eventSeq.Add(1)), "event_time": 1800000000,
		"event": map[string]any{"type": "message", "channel": channel, "user": user, "text": text, "ts": ts, "thread_ts": root, "channel_type": "channel"},
	}
}

// bots returns precept's messages in a thread.
func (r *replica) bots(channel, root string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range r.ws.Thread(channel, root) {
		if m.BotID != "" {
			out = append(out, m)
		}
	}
	return out
}

const vagueComment = "fix this"

func TestReviewerRepliesReEvaluateTheDecisionUntilItIsClear(t *testing.T) {
	r := newClarifyEnv(t, envConfig{})
	r.add(negative("v", "vic", vagueComment, r.clock.Now()))
	r.drain()
	ch, root := r.asked("v")
	first, _ := r.ws.Message(ch, root)
	for _, want := range []string{"<@" + uVic + ">", "decision `v`", "agent `coding-agent`", "> fix this", "what the agent should have done instead", "Question 1 of 3"} {
		if !strings.Contains(first.Text, want) {
			t.Errorf("question lacks %q:\n%s", want, first.Text)
		}
	}
	if nr := r.review("v"); nr.Attempts != 1 || nr.AskedAt.IsZero() || nr.Status != evaluator.PendingClarification || ch != testChannel {
		t.Fatalf("after asking = %+v", nr)
	}

	// A vague reply: re-evaluated, still ambiguous, so precept asks again
	// in the thread for what is still missing.
	r.reply(ch, root, uVic, "redo it please")
	nr := r.review("v")
	if nr.Attempts != 2 || len(nr.Replies) != 1 || nr.Status != evaluator.PendingClarification {
		t.Fatalf("after a vague reply = %+v", nr)
	}
	if ev, _, err := r.ev.Evaluation(context.Background(), "v"); err != nil || ev.Class != evaluator.Ambiguous || ev.Revision != 1 {
		t.Fatalf("evaluation after a vague reply = %+v, %v", ev, err)
	}
	bots := r.bots(ch, root)
	if len(bots) != 1 || !strings.Contains(bots[0].Text, "It is still unclear") || !strings.Contains(bots[0].Text, "Question 2 of 3") {
		t.Fatalf("follow-up = %+v", bots)
	}

	// A clear reply resolves it.
	r.reply(ch, root, uVic, "The retry loop has no timeout and hangs forever; set a timeout on the HTTP client in client.go.")
	if items, _, _ := r.ev.NeedsReview(context.Background(), evaluator.ReviewQuery{}); len(items) != 0 {
		t.Fatalf("still waiting for review: %+v", items)
	}
	ev, _, err := r.ev.Evaluation(context.Background(), "v")
	if err != nil || ev.Class == evaluator.Ambiguous || ev.Revision != 2 {
		t.Fatalf("evaluation after a clear reply = %+v, %v", ev, err)
	}
	bots = r.bots(ch, root)
	if len(bots) != 2 || !strings.Contains(bots[1].Text, "that is clear now") || !strings.Contains(bots[1].Text, string(ev.Class)) {
		t.Fatalf("answer to the clear reply = %+v", bots)
	}
	// A reply after resolution changes nothing.
	r.reply(ch, root, uVic, "one more thing")
	if len(r.bots(ch, root)) != 2 {
		t.Fatal("precept answered a reply to a resolved decision")
	}
}

func TestAfterMaxAttemptsRepliesAreAbsorbedWithoutNewQuestions(t *testing.T) {
	r := newClarifyEnv(t, envConfig{})
	r.add(negative("v", "vic", vagueComment, r.clock.Now()))
	r.drain()
	ch, root := r.asked("v")
	r.reply(ch, root, uVic, "redo it please")
	r.reply(ch, root, uVic, "nope")
	if nr := r.review("v"); nr.Attempts != 3 || nr.Status != evaluator.PendingClarification {
		t.Fatalf("after two vague replies = %+v", nr)
	}
	r.reply(ch, root, uVic, "meh")
	nr := r.review("v")
	if nr.Status != evaluator.NeedsHumanReview || nr.Attempts != 3 || len(nr.Replies) != 3 {
		t.Fatalf("after the third vague reply = %+v", nr)
	}
	bots := r.bots(ch, root)
	last := bots[len(bots)-1]
	if len(bots) != 3 || !strings.Contains(last.Text, "left for human review") {
		t.Fatalf("thread = %+v", bots)
	}
	// Absorb mode: replies are kept with a reaction, no question.
	absorbed := r.reply(ch, root, uVic, "the export on the reports page is broken")
	r.reply(ch, root, uVic, "and the CSV misses a header")
	nr = r.review("v")
	if nr.Status != evaluator.NeedsHumanReview || len(nr.Replies) != 5 || nr.Replies[3] != "the export on the reports page is broken" {
		t.Fatalf("absorbed = %+v", nr)
	}
	if n := len(r.bots(ch, root)); n != 3 {
		t.Fatalf("%d bot messages after absorbing, want 3", n)
	}
	if ev, _, _ := r.ev.Evaluation(context.Background(), "v"); ev.Revision != 3 {
		t.Fatalf("absorbed replies were re-evaluated: revision %d", ev.Revision)
	}
	reacted := false
	for _, re := range r.ws.Reactions() {
		reacted = reacted || (re.TS == absorbed.TS && re.Name == "inbox_tray")
	}
	if !reacted {
		t.Fatalf("reactions = %+v", r.ws.Reactions())
	}
	// The scheduler leaves it alone too.
	r.clock.Advance(72 * time.Hour)
	r.svc.clarify.scanAll(context.Background())
	if n := len(r.bots(ch, root)); n != 3 {
		t.Fatalf("the scheduler posted to an item left for human review")
	}
}

func TestSchedulerReasksStaleItemsButNeverWithinTheRepostGuard(t *testing.T) {
	r := newClarifyEnv(t, envConfig{noRun: true, clarify: clarification.Options{MaxAttempts: 3, StaleAfter: 30 * time.Minute, RepostGuard: 24 * time.Hour}})
	ctx := context.Background()
	r.add(negative("v", "vic", vagueComment, r.clock.Now()))
	r.drain()
	// The loops are stopped: the scan asks the first question.
	r.svc.clarify.scanAll(ctx)
	ch, root := r.asked("v")
	posts := func() int { return r.ws.Calls("chat.postMessage") }
	if posts() != 1 {
		t.Fatalf("%d posts after the first scan", posts())
	}
	for _, step := range []struct {
		advance  time.Duration
		posts    int
		attempts int
		status   string
	}{
		{10 * time.Minute, 1, 1, evaluator.PendingClarification},       // not stale
		{25 * time.Minute, 1, 1, evaluator.PendingClarification},       // stale, but asked 35m ago
		{23 * time.Hour, 1, 1, evaluator.PendingClarification},         // 23h35m: still within the guard
		{30 * time.Minute, 2, 2, evaluator.PendingClarification},       // 24h05m: reminder
		{time.Hour, 2, 2, evaluator.PendingClarification},              // guard again
		{24 * time.Hour, 3, 3, evaluator.PendingClarification},         // third question
		{24*time.Hour + time.Minute, 3, 3, evaluator.NeedsHumanReview}, // no answer to three: human review
		{240 * time.Hour, 3, 3, evaluator.NeedsHumanReview},            // and nothing more
	} {
		r.clock.Advance(step.advance)
		r.svc.clarify.scanAll(ctx)
		r.svc.clarify.scanAll(ctx) // a second scan at the same instant never posts again
		nr := r.review("v")
		if posts() != step.posts || nr.Attempts != step.attempts || nr.Status != step.status {
			t.Fatalf("after +%v: %d posts, attempts %d, %s; want %d, %d, %s", step.advance, posts(), nr.Attempts, nr.Status, step.posts, step.attempts, step.status)
		}
	}
	bots := r.bots(ch, root)
	if len(bots) != 2 || !bots[0].Broadcast || !strings.Contains(bots[0].Text, "a reminder") || !strings.Contains(bots[1].Text, "Question 3 of 3") {
		t.Fatalf("reminders = %+v", bots)
	}
}

func TestSchedulerRecoversRepliesWhoseEventsWereLost(t *testing.T) {
	r := newClarifyEnv(t, envConfig{noRun: true})
	ctx := context.Background()
	r.add(negative("v", "vic", vagueComment, r.clock.Now()))
	r.drain()
	r.svc.clarify.scanAll(ctx)
	ch, root := r.asked("v")
	// The reviewer answers while precept is down: no event arrives. So
	// does someone who may not clarify it.
	r.ws.Reply(ch, root, uMallory, "probably about tests")
	r.ws.Reply(ch, root, uVic, "The CSV export in export.go swallows the write error from the csv writer; return it so callers know the file is incomplete.")
	r.clock.Advance(31 * time.Minute)
	r.svc.clarify.scanAll(ctx)
	if items, _, _ := r.ev.NeedsReview(ctx, evaluator.ReviewQuery{}); len(items) != 0 {
		t.Fatalf("the missed reply was not applied: %+v", items)
	}
	if bots := r.bots(ch, root); len(bots) != 1 || !strings.Contains(bots[0].Text, "that is clear now") {
		t.Fatalf("thread = %+v", bots)
	}
	if ev, _, _ := r.ev.Evaluation(ctx, "v"); ev.Revision != 1 {
		t.Fatalf("evaluation revision %d: mallory's reply was applied too", ev.Revision)
	}
	if got := r.ephemeralsTo(uMallory); len(got) != 0 {
		t.Fatalf("the scan messaged mallory: %v", got)
	}
	// The event arriving late (Slack's retry) is not applied twice.
	m := r.ws.Thread(ch, root)[1]
	code, _ := r.event(messageEvent(ch, root, m.TS, uVic, m.Text), nil)
	r.svc.wait()
	if code != http.StatusOK || len(r.bots(ch, root)) != 1 {
		t.Fatalf("late event: %d, thread %+v", code, r.bots(ch, root))
	}
}

func TestEventsEndpointVerifiesFiltersAndDeduplicates(t *testing.T) {
	r := newClarifyEnv(t, envConfig{opts: Options{Users: map[string]string{uAlice: "alice"}}})
	r.add(negative("v", "vic", vagueComment, r.clock.Now()))
	r.drain()
	ch, root := r.asked("v")
	replies := func() int { return len(r.review("v").Replies) }

	t.Run("url_verification answers the challenge", func(t *testing.T) {
		code, body := r.event(map[string]any{"type": "url_verification", "token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}, nil)
		if code != http.StatusOK || !strings.Contains(body, `"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"`) {
			t.Fatalf("answer = %d %q", code, body)
		}
	})
	t.Run("unsigned url_verification is refused", func(t *testing.T) {
		req := fakeslack.Event("http://app/slack/events", "wrong-secret", r.clock.Now(), map[string]any{"type": "url_verification", "challenge": "c"})
		if code, body := r.do(req); code != http.StatusUnauthorized || strings.Contains(body, `"c"`) {
			t.Fatalf("answer = %d %q", code, body)
		}
	})
	t.Run("malformed event", func(t *testing.T) {
		req := fakeslack.Request("http://app/slack/events", testSecret, r.clock.Now(), "application/json", []byte("{nope"))
		if code, _ := r.do(req); code != http.StatusBadRequest {
			t.Fatalf("answer = %d", code)
		}
	})
	before := replies()
	for _, tc := range []struct {
		name  string
		event map[string]any
	}{
		{"bot message", withEvent(messageEvent(ch, root, "1800000001.000001", uVic, "bot says"), "bot_id", "B0OTHER")},
		{"edit", withEvent(messageEvent(ch, root, "1800000001.000002", uVic, "edited"), "subtype", "message_changed")},
		{"deletion", withEvent(messageEvent(ch, root, "1800000001.000003", uVic, "gone"), "subtype", "message_deleted")},
		{"top-level message", withEvent(messageEvent(ch, "", "1800000001.000004", uVic, "hello channel"), "thread_ts", "")},
		{"thread precept did not start", messageEvent(ch, "1700000000.000001", "1800000001.000005", uVic, "unrelated")},
		{"other event type", map[string]any{"type": "event_callback", "event_id": "EvX", "event": map[string]any{"type": "reaction_added"}}},
	} {
		t.Run("ignores "+tc.name, func(t *testing.T) {
			code, _ := r.event(tc.event, nil)
			r.svc.wait()
			if code != http.StatusOK || replies() != before {
				t.Fatalf("answer %d, replies %d -> %d", code, before, replies())
			}
		})
	}
	t.Run("someone other than the reviewer is told, not applied", func(t *testing.T) {
		m := r.ws.Reply(ch, root, uMallory, "I think it is about tests")
		r.event(messageEvent(ch, root, m.TS, uMallory, m.Text), nil)
		r.svc.wait()
		if replies() != before {
			t.Fatal("an unrelated user's reply was applied")
		}
		r.sawEphemeral(uMallory, "Only the reviewer of this decision")
	})
	t.Run("a retried event is applied once", func(t *testing.T) {
		m := r.ws.Reply(ch, root, uVic, "redo it please")
		ev := messageEvent(ch, root, m.TS, uVic, m.Text)
		if code, _ := r.event(ev, nil); code != http.StatusOK {
			t.Fatal(code)
		}
		r.clock.Advance(time.Second) // Slack signs each delivery afresh
		retry := http.Header{}
		retry.Set("X-Slack-Retry-Num", "1")
		retry.Set("X-Slack-Retry-Reason", "http_timeout")
		if code, _ := r.event(ev, retry); code != http.StatusOK {
			t.Fatal(code)
		}
		r.svc.wait()
		// And the same message under another event id (a second delivery
		// path) is applied once too.
		r.event(messageEvent(ch, root, m.TS, uVic, m.Text), nil)
		r.svc.wait()
		if replies() != before+1 || len(r.bots(ch, root)) != 1 {
			t.Fatalf("replies %d, bot messages %d", replies(), len(r.bots(ch, root)))
		}
	})
	t.Run("a mapped precept user may clarify too", func(t *testing.T) {
		n := replies()
		r.reply(ch, root, uAlice, "redo it, it is wrong")
		if replies() != n+1 {
			t.Fatalf("a curator's reply was not applied:\n%s", r.logs.String())
		}
	})
	t.Run("with clarification off events are ignored", func(t *testing.T) {
		r.svc.SetFeatures(Features{Posting: true})
		n := replies()
		r.reply(ch, root, uVic, "The export hangs; add a timeout in export.go because users wait forever.")
		if replies() != n {
			t.Fatal("a reply was applied with clarification off")
		}
	})
}

func withEvent(ev map[string]any, key string, value any) map[string]any {
	inner := ev["event"].(map[string]any)
	if value == "" {
		delete(inner, key)
	} else {
		inner[key] = value
	}
	return ev
}

func TestReplicasAskOnceAndApplyTheSameRepliesInOrder(t *testing.T) {
	clk := newClock()
	store := NewMemoryStore(clk.Now)
	repo := openFeedbackRepo(t)
	a := newReplica(t, envConfig{store: store, feedbackRepo: repo, opts: Options{Now: clk.Now}}, clk)
	b := newReplica(t, envConfig{store: store, feedbackRepo: repo, ws: a.ws, opts: Options{Now: clk.Now}}, clk)
	fb := negative("v", "vic", vagueComment, clk.Now())
	// Both replicas receive the decision (a redelivery): one file in git.
	a.add(fb)
	b.add(fb)
	a.drain()
	b.drain()
	// Either replica may win the claim and ask; call the one that asked
	// a, the one that learns the thread from git b.
	eventually(t, "the clarification question", func() bool {
		if a.review("v").Thread != "" {
			return true
		}
		if b.review("v").Thread != "" {
			a, b = b, a
			return true
		}
		return false
	})
	ch, root := a.asked("v")
	time.Sleep(100 * time.Millisecond)
	if n := len(a.ws.TopLevel(testChannel)); n != 1 {
		t.Fatalf("%d questions posted by two replicas, want 1", n)
	}
	// b learns the thread from the feedback repository.
	b.svc.clarify.scanAll(context.Background())
	if nr := b.review("v"); nr.Thread != ch+":"+root || nr.Attempts != 1 {
		t.Fatalf("replica b's record = %+v", nr)
	}
	// A reply reaches replica a only; b applies it from git.
	a.reply(ch, root, uVic, "redo it please")
	b.svc.clarify.scanAll(context.Background())
	ra, rb := a.review("v"), b.review("v")
	if len(rb.Replies) != 1 || rb.Replies[0] != ra.Replies[0] || rb.Attempts != ra.Attempts || rb.Attempts != 2 {
		t.Fatalf("replica a %+v, replica b %+v", ra, rb)
	}
	// The next reply reaches b: both resolve, one answer is posted.
	b.reply(ch, root, uVic, "The retry loop has no timeout and hangs forever; set a timeout on the HTTP client in client.go.")
	a.svc.clarify.scanAll(context.Background())
	for name, rep := range map[string]*replica{"a": a, "b": b} {
		if items, _, _ := rep.ev.NeedsReview(context.Background(), evaluator.ReviewQuery{}); len(items) != 0 {
			t.Errorf("replica %s still waits: %+v", name, items)
		}
	}
	if bots := a.bots(ch, root); len(bots) != 2 {
		t.Fatalf("thread = %+v", bots)
	}
}

// failingAsked is the clarification domain with its first fails calls to
// record a question failing, as when the feedback store is unreachable.
type failingAsked struct {
	Clarifications
	mu    sync.Mutex
	fails int
}

func (f *failingAsked) Asked(ctx context.Context, id, thread string, q feedbackstore.Question) (clarification.Situation, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return clarification.Situation{}, errors.New("feedback store unreachable")
	}
	return f.Clarifications.Asked(ctx, id, thread, q)
}

func TestAQuestionWhoseRecordFailedIsRecordedLaterInItsThread(t *testing.T) {
	r := newClarifyEnv(t, envConfig{noRun: true})
	ctx := context.Background()
	r.svc.clarify.clar = &failingAsked{Clarifications: r.svc.clarify.clar, fails: 10}
	r.add(negative("v", "vic", vagueComment, r.clock.Now()))
	r.drain()
	r.svc.clarify.scanAll(ctx)
	questions := r.ws.TopLevel(testChannel)
	if len(questions) != 1 {
		t.Fatalf("%d questions posted, want 1", len(questions))
	}
	if nr := r.review("v"); nr.Thread != "" {
		t.Fatalf("the question was recorded although the store failed: %+v", nr)
	}
	// The reviewer answers in the thread; the event is lost, as is the
	// record of the question. Once the store is back, the scheduler
	// records the question asked in that thread instead of asking again
	// in a new one, and finds the reply there.
	root := questions[0].TS
	r.ws.Reply(testChannel, root, uVic, "The CSV export in export.go swallows the write error from the csv writer; return it so callers know the file is incomplete.")
	r.svc.clarify.clar.(*failingAsked).fails = 0
	r.clock.Advance(11 * time.Minute)
	r.svc.clarify.scanAll(ctx)
	r.clock.Advance(31 * time.Minute)
	r.svc.clarify.scanAll(ctx)
	if got := r.ws.TopLevel(testChannel); len(got) != 1 {
		t.Fatalf("%d questions posted, want the first one only", len(got))
	}
	if items, _, _ := r.ev.NeedsReview(ctx, evaluator.ReviewQuery{}); len(items) != 0 {
		t.Fatalf("the reply in the first thread was lost: %+v", items)
	}
}
