package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/internal/app"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

// statsEvents are the six decisions of the analytics package's fixture
// (analytics/analytics_test.go), as producers send them; its comments
// compute the figures checked here by hand.
var statsEvents = []string{
	`{"decision_id":"a1","agent":"coder","gate_id":"code-review","epic_id":"E1","task_id":"T1","decision":"APPROVED","reviewer_id":"r1","timestamp":"2026-11-02T09:00:00Z","review_duration_seconds":4,"quality_scores":{"clarity":80}}`,
	`{"decision_id":"a2","agent":"coder","gate_id":"code-review","epic_id":"E1","task_id":"T2","decision":"REJECTED","reviewer_id":"r1","timestamp":"2026-11-02T10:00:00Z","review_duration_seconds":8,"tags":["style"],"error_categories":["naming"],"quality_scores":{"clarity":40},"reviewer_comment":"The variable name foo says nothing; name variables after what they hold.","correction_diff":"--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-foo := 1\n+count := 1\n"}`,
	`{"decision_id":"a3","agent":"coder","gate_id":"code-review","epic_id":"E1","task_id":"T2","decision":"APPROVED_WITH_CHANGES","reviewer_id":"r1","timestamp":"2026-11-02T11:00:00Z","review_duration_seconds":2,"tags":["style","tests"],"agent_output":"abcd","approved_output":"abXd","reviewer_comment":"Add a unit test for the empty input case."}`,
	`{"decision_id":"a4","agent":"coder","gate_id":"code-review","epic_id":"E1","task_id":"T1","decision":"REJECTED","reviewer_id":"r2","timestamp":"2026-11-03T09:00:00Z","review_duration_seconds":6,"error_categories":["naming","security"],"correction_diff":"-a\n-b\n+c","reviewer_comment":"Hardcoded API key in config.go; load secrets from the environment."}`,
	`{"decision_id":"a5","agent":"coder","gate_id":"code-review","epic_id":"E2","decision":"APPROVED","reviewer_id":"r2","timestamp":"2026-11-03T10:00:00Z","quality_scores":{"clarity":100}}`,
	`{"decision_id":"a6","agent":"planner","gate_id":"plan-review","epic_id":"E1","decision":"REJECTED","reviewer_id":"r3","timestamp":"2026-11-02T12:00:00Z","review_duration_seconds":10,"tags":["scope"],"agent_output":"aaaa","approved_output":"bbbb","reviewer_comment":"The plan leaves out the migration of existing data; cover it."}`,
}

type statsFigures struct {
	Decisions           string  `json:"decisions"`
	FirstAttempts       string  `json:"first_attempts"`
	FirstPassAccepted   string  `json:"first_pass_accepted"`
	FirstPassAcceptance float64 `json:"first_pass_acceptance"`
	EditDistanceMean    float64 `json:"edit_distance_mean_percent"`
	LinesChanged        string  `json:"lines_changed"`
	P50                 float64 `json:"review_duration_p50_seconds"`
	P90                 float64 `json:"review_duration_p90_seconds"`
	Lessons             []struct {
		Name  string `json:"name"`
		Count string `json:"count"`
	} `json:"lesson_categories"`
}

type statsJSON struct {
	Totals statsFigures `json:"totals"`
	Series []struct {
		Agent   string `json:"agent"`
		Buckets []struct {
			Figures statsFigures `json:"figures"`
		} `json:"buckets"`
	} `json:"series"`
}

// statsServer runs preceptd on a data directory that outlives it, with
// real Redis; stop ends it.
func statsServer(t *testing.T, dataDir, redisAddr string) (a *app.App, stop func()) {
	t.Helper()
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
node: n1
redis: {addr: %q, block: 100ms}
feedback: {batch_wait: 5ms, fsync: false}
auth:
  tokens:
    - {name: ops, role: admin, token: %s}
    - {name: viewer, role: reader, token: reader-token-0123456789}
`, dataDir, redisAddr, adminToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err = app.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			a.Close()
		}
	}
	t.Cleanup(stop)
	return a, stop
}

// TestStatsThroughPreceptdMatchHandComputedFiguresAndSurviveLosingTheFile
// sends decisions through the Redis stream and reads them back with
// `precept stats`, before and after analytics.db is deleted.
func TestStatsThroughPreceptdMatchHandComputedFiguresAndSurviveLosingTheFile(t *testing.T) {
	redisAddr := testenv.Redis(t)
	dataDir := t.TempDir()
	a, stop := statsServer(t, dataDir, redisAddr)
	rdb := testenv.RedisClient(t, redisAddr)
	// One transaction: one batch, one commit, in stream order, so the
	// commit order (which decides first attempts) is the order above.
	_, err := rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		for _, e := range statsEvents {
			p.XAdd(context.Background(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{"data": e}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := []string{"--addr", a.URL(), "--token", "reader-token-0123456789"}
	rng := []string{"--from", "2026-11-02", "--to", "2026-11-03"}
	got := waitForStats(t, append(auth, "--token", adminToken), rng)

	f := got.Totals
	// Hand-computed in analytics/analytics_test.go: first attempts a1 a2
	// a5 a6, approved a1 a5; edit distance 40% and 100%; lines 2 + 3;
	// durations 2 4 6 8 10.
	if f.Decisions != "6" || f.FirstAttempts != "4" || f.FirstPassAccepted != "2" || f.FirstPassAcceptance != 0.5 ||
		f.EditDistanceMean != 70 || f.LinesChanged != "5" || f.P50 != 6 || f.P90 != 10 {
		t.Errorf("totals = %+v", f)
	}
	// Every lesson the evaluator recorded is counted once.
	lessons := 0
	for _, id := range []string{"a2", "a3", "a4", "a6"} {
		r := run("", append(auth, "-o", "json", "evaluation", "get", id)...)
		var ev struct {
			Evaluation struct {
				Lesson *struct {
					Category string `json:"category"`
				} `json:"lesson"`
			} `json:"evaluation"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ev) != nil {
			t.Fatalf("evaluation get %s: %+v", id, r)
		}
		if ev.Evaluation.Lesson != nil && ev.Evaluation.Lesson.Category != "" {
			lessons++
		}
	}
	if counted := lessonTotal(f); lessons == 0 || counted != lessons {
		t.Errorf("lesson categories counted %d, the evaluator recorded %d lessons", counted, lessons)
	}

	// The text chart, for one agent, by day.
	r := run("", append(append(auth, "stats", "--agent", "coder"), rng...)...)
	for _, want := range []string{
		"67% (2 of 3 first attempts approved)",
		"2026-11-02  3          |##########..........|   50% 1/2",
		"2026-11-03  2          |####################|  100% 1/1",
		"p50 4s, p90 8s over 4 decisions",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("stats --agent coder lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}

	// Prometheus: bounded labels, one series per agent, gate and verdict.
	metrics := scrape(t, a.URL())
	if !strings.Contains(metrics, `precept_analytics_decisions_total{agent="coder",gate="code-review",verdict="APPROVED"} 2`) {
		t.Errorf("metrics lack the coder's approvals:\n%s", grepLines(metrics, "precept_analytics"))
	}

	// Bad requests.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stats", "--by", "fortnight"}, 2, "--by must be day, week or month"},
		{[]string{"stats", "--from", "2026-11-05", "--to", "2026-11-01"}, 1, "invalid_argument: from (2026-11-05T00:00:00Z) must be before to"},
		{[]string{"stats", "--from", "2020-01-01", "--to", "2026-11-01"}, 1, "invalid_argument: range of 2497 days is longer than the limit of 731 days"},
		{[]string{"stats", "--from", "yesterday"}, 2, "--from must be a date"},
	} {
		r := run("", append(auth, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}

	// Lose the file: the restarted preceptd rebuilds the same figures.
	before := run("", append(append(auth, "stats", "--json", "--split", "agent"), rng...)...)
	stop()
	if err := os.Remove(filepath.Join(dataDir, "nodes", "n1", "analytics.db")); err != nil {
		t.Fatal(err)
	}
	a, _ = statsServer(t, dataDir, redisAddr)
	auth[1] = a.URL()
	var after result
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		after = run("", append(append(auth, "--protocol", "grpc", "stats", "--json", "--split", "agent"), rng...)...)
		if after.stdout == before.stdout {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after.code != 0 || after.stdout != before.stdout {
		t.Errorf("after losing analytics.db:\n%s\nwant\n%s", after.stdout, before.stdout)
	}
}

// waitForStats polls until the six decisions are counted and the
// evaluator has classified the four negative ones.
func waitForStats(t *testing.T, auth, rng []string) statsJSON {
	t.Helper()
	var got statsJSON
	var r result
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r = run("", append(append(auth, "stats", "--json"), rng...)...)
		got = statsJSON{}
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &got) == nil && got.Totals.Decisions == "6" && evaluated(t, auth) {
			// One more read: lessons handed over after the last step.
			time.Sleep(200 * time.Millisecond)
			r = run("", append(append(auth, "stats", "--json"), rng...)...)
			got = statsJSON{}
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatal(err)
			}
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("stats never counted the decisions: %+v", r)
	return got
}

func evaluated(t *testing.T, auth []string) bool {
	for _, id := range []string{"a2", "a3", "a4", "a6"} {
		if r := run("", append(auth, "evaluation", "get", id)...); r.code != 0 {
			return false
		}
	}
	return true
}

func lessonTotal(f statsFigures) int {
	n := 0
	for _, l := range f.Lessons {
		var c int
		fmt.Sscan(l.Count, &c)
		n += c
	}
	return n
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
