package clarification

import (
	"testing"
	"time"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// conversation builds a record: questions asked at the given offsets
// from t0, replies at the given offsets, a status.
func conversation(status string, asked []time.Duration, replied ...time.Duration) feedbackstore.Clarification {
	rec := feedbackstore.Clarification{DecisionID: "v", Status: status, Thread: "C1:1.0"}
	for i, d := range asked {
		rec.Questions = append(rec.Questions, feedbackstore.Question{Attempt: i + 1, AskedAt: t0.Add(d)})
	}
	for i, d := range replied {
		rec.Replies = append(rec.Replies, feedbackstore.Reply{TS: string(rune('a' + i)), Text: "reply", At: t0.Add(d)})
	}
	return rec
}

func review(status string, replies int) evaluator.NeedsReview {
	r := evaluator.NeedsReview{DecisionID: "v", Status: status, Missing: []string{"why"}}
	for range replies {
		r.Replies = append(r.Replies, "reply")
	}
	return r
}

func asked(offsets ...time.Duration) []time.Duration { return offsets }

const (
	pending = evaluator.PendingClarification
	human   = evaluator.NeedsHumanReview
	done    = evaluator.Resolved
	h       = time.Hour
	m       = time.Minute
)

func TestNextAsksRemindsAndGivesUpOnSchedule(t *testing.T) {
	opts := Options{} // the defaults: 3 attempts, stale after 30m, reposts 24h apart
	for _, tt := range []struct {
		name   string
		review evaluator.NeedsReview
		record feedbackstore.Clarification
		now    time.Duration // after t0
		want   Step
	}{
		{"nothing asked yet: the first question", review(pending, 0), feedbackstore.Clarification{}, 0, Step{Action: AskFirst, Attempt: 1}},
		{"nothing asked yet, even long after", review(pending, 0), feedbackstore.Clarification{}, 1000 * h, Step{Action: AskFirst, Attempt: 1}},
		{"just asked: wait", review(pending, 0), conversation(pending, asked(0)), 10 * m, Step{}},
		{"stale but asked 35m ago: look for missed replies only", review(pending, 0), conversation(pending, asked(0)), 35 * m, Step{Stale: true}},
		{"23h59m after the question: still within the repost guard", review(pending, 0), conversation(pending, asked(0)), 24*h - m, Step{Stale: true}},
		{"24h after the question: remind", review(pending, 0), conversation(pending, asked(0)), 24 * h, Step{Action: Remind, Attempt: 2, Stale: true}},
		{"a reply 10m ago keeps it fresh", review(pending, 1), conversation(pending, asked(0), 25*h-10*m), 25 * h, Step{}},
		{"a reply 31m ago, question 25h ago: remind", review(pending, 1), conversation(pending, asked(0), 25*h-31*m), 25 * h, Step{Action: Remind, Attempt: 2, Stale: true}},
		{"second question within the guard", review(pending, 0), conversation(pending, asked(0, 24*h)), 30 * h, Step{Stale: true}},
		{"third question after the guard", review(pending, 0), conversation(pending, asked(0, 24*h)), 48 * h, Step{Action: Remind, Attempt: 3, Stale: true}},
		{"three unanswered questions, stale: human review", review(pending, 0), conversation(pending, asked(0, 24*h, 48*h)), 48*h + 31*m, Step{Action: LeaveForHumanReview, Attempt: 3, Stale: true}},
		{"three questions, the last one fresh: wait", review(pending, 0), conversation(pending, asked(0, 24*h, 48*h)), 48*h + 29*m, Step{}},
		{"left for human review: nothing more", review(human, 0), conversation(human, asked(0, 24*h, 48*h)), 500 * h, Step{}},
		{"the record says human review: nothing more", review(pending, 0), conversation(human, asked(0, 24*h, 48*h)), 500 * h, Step{}},
		{"resolved stays resolved", review(done, 1), conversation(pending, asked(0), m), 500 * h, Step{}},
		{"resolved in the record stays resolved", review(pending, 1), conversation(done, asked(0), m), 500 * h, Step{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(Situation{Review: tt.review, Record: tt.record}, opts, t0.Add(tt.now))
			if got != tt.want {
				t.Fatalf("Next = %+v (%s), want %+v (%s)", got, got.Action, tt.want, tt.want.Action)
			}
		})
	}
}

func TestNextFollowsTheOptions(t *testing.T) {
	opts := Options{MaxAttempts: 1, StaleAfter: time.Minute, RepostGuard: time.Hour}
	sit := Situation{Review: review(pending, 0), Record: conversation(pending, asked(0))}
	if got := Next(sit, opts, t0.Add(2*time.Minute)); got.Action != LeaveForHumanReview {
		t.Fatalf("with one attempt allowed: %+v", got)
	}
	opts.MaxAttempts = 5
	if got := Next(sit, opts, t0.Add(time.Hour)); got.Action != Remind || got.Attempt != 2 {
		t.Fatalf("after a one-hour guard: %+v", got)
	}
	if d := (Options{}).WithDefaults(); d.MaxAttempts != DefaultMaxAttempts || d.StaleAfter != DefaultStaleAfter || d.RepostGuard != DefaultRepostGuard {
		t.Fatalf("defaults = %+v", d)
	}
}

func TestAfterReplyFollowsUpThanksOrGivesUp(t *testing.T) {
	reply := func(rec feedbackstore.Clarification, i int) feedbackstore.Reply { return rec.Replies[i] }
	absorbed := conversation(human, asked(0, h, 2*h), 3*h, 4*h)
	absorbed.Replies[1].Absorbed = true
	for _, tt := range []struct {
		name   string
		review evaluator.NeedsReview
		record feedbackstore.Clarification
		reply  int
		want   Step
	}{
		{"a vague first reply: follow up", review(pending, 1), conversation(pending, asked(0), m), 0, Step{Action: FollowUp, Attempt: 2}},
		{"a vague second reply: follow up", review(pending, 2), conversation(pending, asked(0, h), m, 2*h), 1, Step{Action: FollowUp, Attempt: 3}},
		{"a vague reply to the last question: human review", review(pending, 3), conversation(pending, asked(0, h, 2*h), m, 2*h, 3*h), 2, Step{Action: LeaveForHumanReview, Attempt: 3}},
		{"the reply that resolved it: thanks", review(done, 2), conversation(pending, asked(0, h), m, 2*h), 1, Step{Action: Thank}},
		{"a reply after the one that resolved it: nothing", review(done, 1), conversation(pending, asked(0, h), m, 2*h), 1, Step{}},
		{"resolved in the record: nothing", review(pending, 1), conversation(done, asked(0), m), 0, Step{}},
		{"after human review: absorb", review(human, 4), absorbed, 1, Step{Action: Absorb}},
		{"left for human review by a concurrent reply: nothing", review(human, 4), conversation(human, asked(0, h, 2*h), 3*h, 4*h), 1, Step{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := AfterReply(Situation{Review: tt.review, Record: tt.record}, reply(tt.record, tt.reply), Options{})
			if got != tt.want {
				t.Fatalf("AfterReply = %+v (%s), want %+v (%s)", got, got.Action, tt.want, tt.want.Action)
			}
		})
	}
}

func TestRepliesAreAbsorbedOnlyAfterHumanReview(t *testing.T) {
	for status, want := range map[string]bool{"": false, pending: false, human: true, done: false} {
		if got := Absorbs(feedbackstore.Clarification{Status: status}); got != want {
			t.Errorf("Absorbs(%q) = %v", status, got)
		}
	}
}

func TestActionsNameThemselvesAndTheirQuestions(t *testing.T) {
	for a, want := range map[Action]string{Nothing: "nothing", AskFirst: "ask-first", FollowUp: "follow-up", Remind: "remind",
		LeaveForHumanReview: "leave-for-human-review", Thank: "thank", Absorb: "absorb", Action(99): "unknown"} {
		if a.String() != want {
			t.Errorf("%d = %s, want %s", a, a, want)
		}
	}
	for a, want := range map[Action]string{AskFirst: KindFirst, FollowUp: KindFollowUp, Remind: KindReminder, Thank: ""} {
		if a.Kind() != want {
			t.Errorf("%s asks a %q question, want %q", a, a.Kind(), want)
		}
	}
}
