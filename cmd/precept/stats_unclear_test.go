package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lib/testenv"
)

// unclearEvents are five rejections whose comments say nothing the
// rubric can use, and one clear one, on a day of their own.
var unclearEvents = []string{
	`{"decision_id":"u1","agent":"coder","gate_id":"code-review","epic_id":"E9","task_id":"T1","decision":"REJECTED","reviewer_id":"r1","timestamp":"2026-11-10T09:00:00Z","reviewer_comment":"fix this"}`,
	`{"decision_id":"u2","agent":"coder","gate_id":"code-review","epic_id":"E9","task_id":"T2","decision":"REJECTED","reviewer_id":"r1","timestamp":"2026-11-10T09:10:00Z","reviewer_comment":"wrong"}`,
	`{"decision_id":"u3","agent":"coder","gate_id":"code-review","epic_id":"E9","task_id":"T3","decision":"REJECTED","reviewer_id":"r2","timestamp":"2026-11-10T09:20:00Z","reviewer_comment":"nope, not like this"}`,
	`{"decision_id":"u4","agent":"coder","gate_id":"code-review","epic_id":"E9","task_id":"T4","decision":"REJECTED","reviewer_id":"r2","timestamp":"2026-11-10T09:30:00Z","reviewer_comment":"hmm no"}`,
	`{"decision_id":"u5","agent":"coder","gate_id":"code-review","epic_id":"E9","task_id":"T5","decision":"REJECTED","reviewer_id":"r3","timestamp":"2026-11-10T09:40:00Z","reviewer_comment":"meh"}`,
	`{"decision_id":"u6","agent":"coder","gate_id":"code-review","epic_id":"E9","task_id":"T6","decision":"REJECTED","reviewer_id":"r3","timestamp":"2026-11-10T09:50:00Z","reviewer_comment":"Hardcoded API key in config.go; load secrets from the environment because keys leak through the repository."}`,
}

type unclearJSON struct {
	Totals struct {
		Unclear struct {
			Unclear        string  `json:"unclear"`
			Resolved       string  `json:"resolved"`
			NeedsReview    string  `json:"needs_review"`
			Open           string  `json:"open"`
			ResolutionRate float64 `json:"resolution_rate"`
			Promotions     string  `json:"promotions"`
			P50            float64 `json:"promotion_p50_seconds"`
			P90            float64 `json:"promotion_p90_seconds"`
		} `json:"unclear"`
		RubricEvaluations string `json:"rubric_evaluations"`
		RubricFill        []struct {
			Attribute   string  `json:"attribute"`
			Evaluations string  `json:"evaluations"`
			Met         string  `json:"met"`
			Rate        float64 `json:"rate"`
		} `json:"rubric_fill"`
	} `json:"totals"`
}

// TestStatsReportWhatBecameOfUnclearFeedback drives the clarification
// loop through preceptd's own components: of five unclear decisions three
// are clarified and promoted after different delays, one is left for
// human review and one is still being asked about. GetAnalytics (read by
// `precept stats --json`) and the text report must give the resolution
// rate, the promotion percentiles of those delays and the rubric fill
// rates of the evaluations the evaluator holds — and keep them when
// analytics.db is rebuilt.
func TestStatsReportWhatBecameOfUnclearFeedback(t *testing.T) {
	redisAddr := testenv.Redis(t)
	dataDir := t.TempDir()
	a, stop := statsServer(t, dataDir, redisAddr)
	rdb := testenv.RedisClient(t, redisAddr)
	ctx := context.Background()
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range unclearEvents {
			p.XAdd(ctx, &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{"data": e}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := []string{"--addr", a.URL(), "--token", "reader-token-0123456789"}
	rng := []string{"--from", "2026-11-10", "--to", "2026-11-10"}
	clar := clarification.New(a.Feedback, a.Evaluator, clarification.Options{}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		pending, err := clar.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d decisions wait for clarification, want u1-u5", len(pending))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Analytics counts them as open first, so what follows reaches it
	// through the evaluator's hooks, not its lookups.
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := run("", append(append(auth, "stats", "--json"), rng...)...)
		var got unclearJSON
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &got) == nil && got.Totals.Unclear.Open == "5" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never counted five open unclear decisions: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Each unclear decision is asked about; u1-u3 are answered clearly
	// 10 minutes, 1 hour and 5 hours after they arrived.
	resolveAfter := map[string]time.Duration{"u1": 10 * time.Minute, "u2": time.Hour, "u3": 5 * time.Hour}
	answers := map[string]string{
		"u1": "The retry helper in retry.go has no unit tests; add table tests because regressions slip through.",
		"u2": "The handler in server.go swallows the error; return it wrapped because callers cannot tell a failure from success.",
		"u3": "The function parse() in config.go panics on an empty file; return an error instead because the service crashes at start.",
	}
	for i, id := range []string{"u1", "u2", "u3", "u4", "u5"} {
		rec, err := a.Feedback.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := clar.Asked(ctx, id, fmt.Sprintf("C1:%d.000100", i), feedbackstore.Question{Attempt: 1, Kind: clarification.KindFirst, AskedAt: rec.ReceivedAt.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		delay, ok := resolveAfter[id]
		if !ok {
			continue
		}
		next, sit, _, err := clar.Reply(ctx, id, feedbackstore.Reply{TS: fmt.Sprintf("%d.000200", i), User: "U1", Text: answers[id], At: rec.ReceivedAt.Add(delay)})
		if err != nil {
			t.Fatal(err)
		}
		if next.Action != clarification.Thank {
			t.Fatalf("%s: the answer did not resolve it (%v, missing %v)", id, next.Action, sit.Review.Missing)
		}
		if err := clar.Resolve(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := clar.Leave(ctx, "u4"); err != nil {
		t.Fatal(err)
	}

	// The fill rates the evaluator's evaluations give, attribute by
	// attribute, over the six rejections.
	type fill struct{ met, of int }
	wantFill := map[string]*fill{}
	for _, e := range unclearEvents {
		var d struct {
			ID string `json:"decision_id"`
		}
		json.Unmarshal([]byte(e), &d)
		ev, _, err := a.Evaluator.Evaluation(ctx, d.ID)
		if err != nil || ev.Rubric == nil {
			t.Fatalf("evaluation of %s: %v (rubric %v)", d.ID, err, ev.Rubric)
		}
		for _, at := range ev.Rubric.Attributes {
			f := wantFill[at.Name]
			if f == nil {
				f = &fill{}
				wantFill[at.Name] = f
			}
			f.of++
			if at.Present {
				f.met++
			}
		}
	}

	var got unclearJSON
	var r result
	deadline = time.Now().Add(30 * time.Second)
	for {
		r = run("", append(append(auth, "stats", "--json"), rng...)...)
		got = unclearJSON{}
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &got) == nil && got.Totals.Unclear.Resolved == "3" && got.Totals.Unclear.NeedsReview == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never counted the clarifications: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	u := got.Totals.Unclear
	if u.Unclear != "5" || u.Open != "1" || u.Promotions != "3" || u.ResolutionRate != 0.75 {
		t.Errorf("unclear feedback = %+v; want 5 unclear, 3 resolved, 1 needs review, 1 open, rate 0.75", u)
	}
	// Nearest rank of 10 min, 1 h, 5 h: the median is 1 h, p90 5 h, each
	// within the histogram's 4.4 %.
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.045*want }
	if !near(u.P50, 3600) || !near(u.P90, 5*3600) {
		t.Errorf("time to promotion p50 %.0fs, p90 %.0fs; want 3600s and 18000s", u.P50, u.P90)
	}
	if got.Totals.RubricEvaluations != "6" || len(got.Totals.RubricFill) != len(wantFill) {
		t.Fatalf("rubric: %s evaluations, fill %+v; want 6 over %d attributes", got.Totals.RubricEvaluations, got.Totals.RubricFill, len(wantFill))
	}
	varied := false
	for _, f := range got.Totals.RubricFill {
		w := wantFill[f.Attribute]
		if w == nil || f.Met != fmt.Sprint(w.met) || f.Evaluations != fmt.Sprint(w.of) || math.Abs(f.Rate-float64(w.met)/float64(w.of)) > 1e-9 {
			t.Errorf("fill of %s = %+v, the evaluations give %+v", f.Attribute, f, w)
		}
		varied = varied || (w != nil && w.met != 0 && w.met != w.of)
	}
	if !varied {
		t.Errorf("every attribute met by all or none: the fixture does not tell rates apart (%+v)", got.Totals.RubricFill)
	}

	text := run("", append(append(auth, "stats"), rng...)...)
	for _, want := range []string{
		"5: 3 resolved by clarification, 1 needs review, 1 still open",
		"resolution rate",
		"75% (3 of 4 resolved or left for review)",
		"over 3 promoted decisions",
		"(over 6 evaluations)",
	} {
		if text.code != 0 || !strings.Contains(text.stdout, want) {
			t.Errorf("stats lacks %q:\n%s%s", want, text.stdout, text.stderr)
		}
	}

	// Lose the file: the rebuild asks the evaluator and reaches the same
	// figures.
	before := run("", append(append(auth, "stats", "--json"), rng...)...)
	stop()
	if err := os.Remove(filepath.Join(dataDir, "nodes", "n1", "analytics.db")); err != nil {
		t.Fatal(err)
	}
	a, _ = statsServer(t, dataDir, redisAddr)
	auth[1] = a.URL()
	var after result
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		after = run("", append(append(auth, "stats", "--json"), rng...)...)
		if after.stdout == before.stdout {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after.code != 0 || after.stdout != before.stdout {
		t.Errorf("after losing analytics.db:\n%s\nwant\n%s", after.stdout, before.stdout)
	}
}
