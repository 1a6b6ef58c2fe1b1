package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/internal/app"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

const (
	exportSalt  = "e2e-export-salt-0123456789"
	readerToken = "reader-token-0123456789"
)

// exportEffects is the rule-effect provider of the end-to-end tests:
// fixture effects, or a failure once fail is set.
type exportEffects struct{ fail atomic.Bool }

var fixtureEffects = []*preceptv1.RuleEffect{
	{RuleId: "R-1", Agents: []string{"coding-agent"}, Status: preceptv1.RuleStatus_RULE_STATUS_ACTIVE, Exposures: 40, Recurrences: 3,
		RateAfter: 0.075, RateAfterInterval: &preceptv1.Interval{Low: 0.03, High: 0.2}, Change: -0.2, Verdict: "improving",
		Method: "wilson 95%; newcombe", Summary: "recurrences fell from 11 in 40 to 3 in 40"},
	{RuleId: "R-2", Agents: []string{"docs-agent"}, Verdict: "idle"},
}

func (e *exportEffects) effects(context.Context) ([]*preceptv1.RuleEffect, error) {
	if e.fail.Load() {
		return nil, errors.New("effects store unreachable")
	}
	return fixtureEffects, nil
}

// exportServer runs preceptd with real Redis, an export salt, an admin
// and a reader, and the fixture rule effects; logs go to the returned
// buffer.
func exportServer(t *testing.T) (addr string, rdb *redis.Client, effects *exportEffects, logs *testenv.SyncBuffer) {
	t.Helper()
	redisAddr := testenv.Redis(t)
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
redis: {addr: %q, block: 100ms}
feedback: {batch_wait: 5ms, fsync: false}
export: {salt: %s}
auth:
  tokens:
    - {name: ops, role: admin, token: %s}
    - {name: viewer, role: reader, token: %s}
`, t.TempDir(), redisAddr, exportSalt, adminToken, readerToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs = &testenv.SyncBuffer{}
	a, err := app.New(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	effects = &exportEffects{}
	a.RuleEffects = effects.effects
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; a.Close() })
	return a.URL(), testenv.RedisClient(t, redisAddr), effects, logs
}

// exportEvent is a decision the producer sends. Every word a person
// wrote, and every reviewer id, holds "qz", which nothing precept makes
// up does (pseudonyms and commits are hex): an anonymized export must not
// hold "qz" anywhere.
type exportEvent struct {
	DecisionID     string           `json:"decision_id"`
	GateID         string           `json:"gate_id"`
	EpicID         string           `json:"epic_id"`
	TaskID         string           `json:"task_id"`
	Agent          string           `json:"agent"`
	Decision       string           `json:"decision"`
	ReviewerID     string           `json:"reviewer_id"`
	Timestamp      string           `json:"timestamp"`
	Comment        string           `json:"reviewer_comment,omitempty"`
	AgentOutput    string           `json:"agent_output,omitempty"`
	ApprovedOutput string           `json:"approved_output,omitempty"`
	CorrectionDiff string           `json:"correction_diff,omitempty"`
	Tags           []string         `json:"tags,omitempty"`
	ErrorCats      []string         `json:"error_categories,omitempty"`
	QualityScores  map[string]int32 `json:"quality_scores,omitempty"`
	ScopePath      string           `json:"scope_path,omitempty"`
	PromptVersion  string           `json:"prompt_version,omitempty"`
}

// preceptVersion is a prompt version of the form precept serves, which
// an anonymized export keeps.
const preceptVersion = "v1:3f2a9c0d1e4b5a67"

func exportEvents() []exportEvent {
	reviewers := []string{"quinn.qzr1", "zed.qzr2", "ana.qzr3", "bo.qzr4"}
	var evs []exportEvent
	for i := range 8 {
		ev := exportEvent{
			DecisionID: fmt.Sprintf("exp-%d", i), GateID: "HITL-2", EpicID: fmt.Sprintf("EPIC-qz%d", i%3), TaskID: fmt.Sprintf("qz.task%d@corp", i),
			Agent: "coding-agent", ScopePath: fmt.Sprintf("home/qzuser%d/notes.md", i), PromptVersion: preceptVersion,
			Decision: "REJECTED", ReviewerID: reviewers[i%4], Timestamp: fmt.Sprintf("2026-11-%02dT10:00:00Z", 10+i),
			Comment:        fmt.Sprintf("The fetch loop qzloop%d retries forever without any backoff. Please use the shared retry helper qzhelp%d instead of a hand-written loop.", i, i),
			AgentOutput:    fmt.Sprintf("for { fetchqz%d() }", i),
			ApprovedOutput: fmt.Sprintf("retry.Do(fetchqz%d)", i),
			CorrectionDiff: fmt.Sprintf("-for { fetchqz%d() }\n+retry.Do(fetchqz%d)\n", i, i),
			Tags:           []string{fmt.Sprintf("qztag%d", i), "reuse"},
			ErrorCats:      []string{"ignored_constraints"},
			QualityScores:  map[string]int32{"accuracy": int32(40 + i)},
		}
		if i%2 == 1 {
			ev.PromptVersion = fmt.Sprintf("Qzara's prompt %d", i)
		}
		if i%4 == 3 {
			ev.Decision, ev.Comment = "APPROVED", fmt.Sprintf("=HYPERLINK(\"http://qzevil%d\") looks fine", i)
			ev.CorrectionDiff, ev.ApprovedOutput = "", ""
		}
		evs = append(evs, ev)
	}
	return evs
}

// secrets are the strings of the events an anonymized export must not
// hold.
func (ev exportEvent) secrets() []string {
	out := []string{ev.ReviewerID, ev.Comment, ev.AgentOutput, ev.ApprovedOutput, ev.CorrectionDiff,
		ev.DecisionID, ev.EpicID, ev.TaskID, ev.ScopePath}
	if ev.PromptVersion != preceptVersion {
		out = append(out, ev.PromptVersion)
	}
	out = append(out, ev.Tags[0])
	// Sentences quoted on their own (a lesson's "said" and "asked").
	for _, s := range strings.Split(ev.Comment, ". ") {
		out = append(out, strings.TrimSuffix(s, "."))
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// jsonLines parses JSON lines into objects.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// ofKind returns the lines of one kind.
func ofKind(lines []map[string]any, kind string) []map[string]any {
	return slices.DeleteFunc(slices.Clone(lines), func(m map[string]any) bool { return m["kind"] != kind })
}

// ingest adds the events to the stream and waits until all are stored
// and evaluated, as an export's summary says.
func ingest(t *testing.T, addr string, rdb *redis.Client, evs []exportEvent) {
	t.Helper()
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		if err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{"data": string(b)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := run("", "--addr", addr, "--token", adminToken, "export")
		if r.code == 0 {
			lines := jsonLines(t, r.stdout)
			sum := lines[len(lines)-1]
			if sum["decisions"] == fmt.Sprint(len(evs)) && sum["pending_evaluations"] == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all stored and evaluated: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestExportEndToEndInEveryFormat(t *testing.T) {
	addr, rdb, _, logs := exportServer(t)
	evs := exportEvents()
	ingest(t, addr, rdb, evs)
	admin := []string{"--addr", addr, "--token", adminToken}

	// JSON lines on stdout: every decision as it was sent, each followed
	// by its evaluation as GetEvaluation shows it, then the rule effects
	// and the summary.
	r := run("", append(admin, "export", "--format", "jsonl")...)
	if r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	lines := jsonLines(t, r.stdout)
	decisions, evaluations := ofKind(lines, "decision"), ofKind(lines, "evaluation")
	if len(decisions) != len(evs) || len(evaluations) != len(evs) || len(ofKind(lines, "rule_effect")) != 2 || lines[len(lines)-1]["kind"] != "summary" {
		t.Fatalf("%d lines: %d decisions, %d evaluations", len(lines), len(decisions), len(evaluations))
	}
	// Records come in commit order, which need not be the order the
	// events were added in: compare each with its own event.
	position := map[string]int{}
	for i, d := range decisions {
		position[d["decision"].(map[string]any)["decision_id"].(string)] = i
	}
	slices.SortFunc(evs, func(a, b exportEvent) int { return position[a.DecisionID] - position[b.DecisionID] })
	for i, ev := range evs {
		d := decisions[i]["decision"].(map[string]any)
		if id, _ := evaluations[i]["decision_id"].(string); id != ev.DecisionID {
			t.Fatalf("evaluation %d is of %s, its decision is %s", i, id, ev.DecisionID)
		}
		sent, _ := json.Marshal(ev)
		var want map[string]any
		json.Unmarshal(sent, &want)
		for k, v := range want {
			if fmt.Sprint(d[k]) != fmt.Sprint(v) {
				t.Errorf("%s: %s exported as %v, sent %v", ev.DecisionID, k, d[k], v)
			}
		}
		g := run("", append(admin, "-o", "json", "evaluation", "get", ev.DecisionID)...)
		var got struct{ Evaluation map[string]any }
		if g.code != 0 || json.Unmarshal([]byte(g.stdout), &got) != nil {
			t.Fatalf("evaluation get: %+v", g)
		}
		exported := evaluations[i]
		delete(exported, "kind")
		// The rule manager may draft a proposal from the cluster between
		// the two reads.
		for _, ev := range []map[string]any{exported, got.Evaluation} {
			if a, ok := ev["proposed_action"].(map[string]any); ok {
				delete(a, "proposal_id")
			}
		}
		if a, b := fmt.Sprint(exported), fmt.Sprint(got.Evaluation); a != b {
			t.Errorf("%s: exported evaluation\n%s\nGetEvaluation\n%s", ev.DecisionID, a, b)
		}
	}

	// The same over gRPC, but for the summary's time and the proposals
	// drafted meanwhile.
	g := run("", append(admin, "--protocol", "grpc", "export")...)
	proposal := regexp.MustCompile(`,"proposal_id":"[^"]*"`)
	grpcLines := strings.Split(proposal.ReplaceAllString(strings.TrimSpace(g.stdout), ""), "\n")
	connectLines := strings.Split(proposal.ReplaceAllString(strings.TrimSpace(r.stdout), ""), "\n")
	if g.code != 0 || !slices.Equal(grpcLines[:len(grpcLines)-1], connectLines[:len(connectLines)-1]) {
		t.Fatalf("export over gRPC differs: %+v", g)
	}

	// CSV and Parquet: one file per kind, with what was sent.
	for _, format := range []string{"csv", "parquet"} {
		dir := filepath.Join(t.TempDir(), "out")
		r := run("", append(admin, "export", "--format", format, "--out", dir)...)
		if r.code != 0 || !strings.Contains(r.stdout, "exported 8 decisions, 8 evaluations and 2 rule effects") {
			t.Fatalf("%s export: %+v", format, r)
		}
		comments, reviewers, classes, effects := exportedColumns(t, dir, format)
		for i, ev := range evs {
			wantComment := ev.Comment
			if format == "csv" && strings.HasPrefix(wantComment, "=") {
				wantComment = "'" + wantComment
			}
			if comments[i] != wantComment || reviewers[i] != ev.ReviewerID {
				t.Errorf("%s: %s exported as %q by %q", format, ev.DecisionID, comments[i], reviewers[i])
			}
			if want := evaluations[i]["classification"]; classes[i] != want {
				t.Errorf("%s: %s classified %q, JSON lines say %v", format, ev.DecisionID, classes[i], want)
			}
		}
		if !slices.Equal(effects, []string{"R-1", "R-2"}) {
			t.Errorf("%s: rule effects %v", format, effects)
		}
	}

	// A range of two days: the decisions of those days only.
	r = run("", append(admin, "export", "--from", "2026-11-12", "--to", "2026-11-13")...)
	var ids []string
	for _, d := range ofKind(jsonLines(t, r.stdout), "decision") {
		ids = append(ids, d["decision"].(map[string]any)["decision_id"].(string))
	}
	slices.Sort(ids)
	if r.code != 0 || !slices.Equal(ids, []string{"exp-2", "exp-3"}) {
		t.Fatalf("range export: %v %+v", ids, r)
	}
	if strings.Contains(logs.String(), exportSalt) {
		t.Fatal("the salt reached the log")
	}
}

// exportedColumns reads back a CSV or Parquet export: the comments and
// reviewers of its decisions, its evaluations' classes and its rule ids.
func exportedColumns(t *testing.T, dir, format string) (comments, reviewers, classes, effects []string) {
	t.Helper()
	path := func(name string) string { return filepath.Join(dir, name+"."+format) }
	if format == "csv" {
		for _, r := range readCSV(t, path("decisions")) {
			comments, reviewers = append(comments, r["reviewer_comment"]), append(reviewers, r["reviewer_id"])
		}
		for _, r := range readCSV(t, path("evaluations")) {
			classes = append(classes, r["classification"])
		}
		for _, r := range readCSV(t, path("rule_effects")) {
			effects = append(effects, r["rule_id"])
		}
		return
	}
	d, e, re := readParquet(t, path("decisions")), readParquet(t, path("evaluations")), readParquet(t, path("rule_effects"))
	for i := range d.rows {
		comments, reviewers = append(comments, d.cell(t, "reviewer_comment", i).(string)), append(reviewers, d.cell(t, "reviewer_id", i).(string))
	}
	for i := range e.rows {
		classes = append(classes, e.cell(t, "classification", i).(string))
	}
	for i := range re.rows {
		effects = append(effects, re.cell(t, "rule_id", i).(string))
	}
	return
}

// exportedText is everything an export directory holds, as bytes and,
// for Parquet, as the values a reader decodes (the files are compressed).
func exportedText(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
		if strings.HasSuffix(p, ".parquet") {
			cols := readParquet(t, p).columns
			for _, name := range slices.Sorted(maps.Keys(cols)) {
				fmt.Fprintln(&b, name, cols[name])
			}
		}
	}
	return b.String()
}

func TestAnonymizedExportsHoldNoReviewerIDAndNoFreeText(t *testing.T) {
	addr, rdb, _, logs := exportServer(t)
	evs := exportEvents()
	ingest(t, addr, rdb, evs)
	reader := []string{"--addr", addr, "--token", readerToken}

	outputs := map[string]string{}
	r := run("", append(reader, "export", "--anonymize")...)
	if r.code != 0 {
		t.Fatalf("anonymized export to stdout: %+v", r)
	}
	outputs["stdout"] = r.stdout
	for _, format := range []string{"jsonl", "csv", "parquet"} {
		dir := t.TempDir()
		r := run("", append(reader, "export", "--anonymize", "--format", format, "--out", dir)...)
		if r.code != 0 || !strings.Contains(r.stdout, "(anonymized)") {
			t.Fatalf("anonymized %s export: %+v", format, r)
		}
		outputs[format] = exportedText(t, dir)
	}
	for name, out := range outputs {
		for _, ev := range evs {
			for _, s := range ev.secrets() {
				if strings.Contains(out, s) {
					t.Errorf("anonymized %s export holds %q", name, s)
				}
			}
		}
		if i := strings.Index(strings.ToLower(out), "qz"); i >= 0 {
			t.Errorf("anonymized %s export holds words people wrote: …%s…", name, out[max(0, i-80):min(len(out), i+40)])
		}
		if strings.Contains(out, exportSalt) {
			t.Errorf("anonymized %s export holds the salt", name)
		}
	}
	// The same reviewer has the same pseudonym throughout; different
	// reviewers have different ones.
	lines := jsonLines(t, outputs["stdout"])
	// Exported decisions are told apart by their timestamps, which the
	// export keeps: the order they were ingested in is not guaranteed.
	event := func(d map[string]any) exportEvent {
		t.Helper()
		ts := d["decision"].(map[string]any)["timestamp"]
		for _, ev := range evs {
			if ev.Timestamp == ts {
				return ev
			}
		}
		t.Fatalf("no event has the timestamp %v", ts)
		return exportEvent{}
	}
	pseudonyms := map[string]string{}
	for _, d := range ofKind(lines, "decision") {
		ev := event(d)
		p := d["decision"].(map[string]any)["reviewer_id"].(string)
		if !strings.HasPrefix(p, "anon-") {
			t.Fatalf("reviewer id %q is not a pseudonym", p)
		}
		if prev, ok := pseudonyms[ev.ReviewerID]; ok && prev != p {
			t.Fatalf("%s has two pseudonyms", ev.ReviewerID)
		}
		pseudonyms[ev.ReviewerID] = p
	}
	distinct := map[string]bool{}
	for _, p := range pseudonyms {
		distinct[p] = true
	}
	if len(distinct) != 4 {
		t.Fatalf("4 reviewers got %d pseudonyms", len(distinct))
	}
	// Hashed decision ids still join each decision to its evaluation;
	// precept's own prompt versions are kept.
	evaluations := ofKind(lines, "evaluation")
	for i, d := range ofKind(lines, "decision") {
		dec := d["decision"].(map[string]any)
		id := dec["decision_id"].(string)
		if !strings.HasPrefix(id, "anon-") || len(evaluations) <= i || evaluations[i]["decision_id"] != id {
			t.Fatalf("decision %q does not join its evaluation %v", id, evaluations[min(i, len(evaluations)-1)])
		}
		ev := event(d)
		if want := map[bool]any{true: preceptVersion, false: nil}[ev.PromptVersion == preceptVersion]; dec["prompt_version"] != want {
			t.Errorf("%s: prompt version %v exported as %v", ev.DecisionID, ev.PromptVersion, dec["prompt_version"])
		}
	}
	if strings.Contains(logs.String(), exportSalt) {
		t.Fatal("the salt reached the log")
	}
}

func TestExportFailuresLeaveNoPartialFile(t *testing.T) {
	addr, rdb, effects, _ := exportServer(t)
	ingest(t, addr, rdb, exportEvents()[:2])
	admin := []string{"--addr", addr, "--token", adminToken}
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	notADir := filepath.Join(base, "file")
	os.WriteFile(notADir, []byte("x"), 0o644)

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown format", []string{"--format", "xlsx", "--out", fresh}, 2, `--format must be jsonl, csv or parquet, got "xlsx"`},
		{"from after to", []string{"--from", "2026-11-20", "--to", "2026-11-10", "--out", fresh}, 2, "--from 2026-11-20 is not before --to 2026-11-10"},
		{"bad date", []string{"--from", "20/11/2026", "--out", fresh}, 2, `--from "20/11/2026" is not a date`},
		{"bad time", []string{"--to", "2026-11-20T25:00:00Z", "--out", fresh}, 2, "--to"},
		{"csv to stdout", []string{"--format", "csv"}, 2, "give --out DIR"},
		{"out is a file", []string{"--format", "csv", "--out", notADir}, 2, "is not a directory"},
		{"extra argument", []string{"now", "--out", fresh}, 2, `export takes flags only, got "now"`},
		{"reader, full", []string{"--token", readerToken, "--format", "csv", "--out", fresh}, 1, "permission_denied: viewer has role reader; a full export needs approver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run("", append(append(admin, "export"), tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit %d with %q", r.code, r.stderr, tt.code, tt.want)
			}
			if r.stdout != "" {
				t.Fatalf("wrote %q", r.stdout)
			}
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Fatalf("created %s", fresh)
			}
		})
	}

	// An export cut short by the server leaves an earlier one as it was,
	// and no temporary file.
	for _, format := range []string{"csv", "parquet", "jsonl"} {
		dir := filepath.Join(base, format)
		if r := run("", append(admin, "export", "--format", format, "--out", dir)...); r.code != 0 {
			t.Fatalf("export: %+v", r)
		}
		before := exportedText(t, dir)
		effects.fail.Store(true)
		r := run("", append(admin, "export", "--format", format, "--out", dir)...)
		effects.fail.Store(false)
		if r.code != 1 || !strings.Contains(r.stderr, "export cut short, nothing written: internal: internal error") {
			t.Fatalf("%s: failing export: %+v", format, r)
		}
		if after := exportedText(t, dir); after != before {
			t.Fatalf("%s: a failed export changed the files", format)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 3 {
			t.Fatalf("%s: %d files left: %v", format, len(entries), entries)
		}
	}
	// On stdout the lines cannot be taken back: the summary is missing.
	effects.fail.Store(true)
	r := run("", append(admin, "export")...)
	if r.code != 1 || bytes.Contains([]byte(r.stdout), []byte(`"kind":"summary"`)) || !strings.Contains(r.stderr, "the lines printed lack the summary") {
		t.Fatalf("failing export to stdout: %+v", r)
	}
}

// TestExportCarriesTheLearningLoopsRuleEffects exports from a server
// whose rule effects come from the learning loop, not a fixture: an
// approved rule's effect is exported as `precept rules effect --retired` shows
// it, and with the loop off the summary says there are none.
func TestExportCarriesTheLearningLoopsRuleEffects(t *testing.T) {
	cli := ruleServer(t)
	r := cli("carol", "proposals", "propose", "--agent", "coding-agent", "--type", "constraint",
		"--text", "Never log API tokens or passwords, even at debug level.", "--rationale", "Two incidents in November.")
	id := proposalIDPattern.FindString(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("propose: %+v", r)
	}
	for _, who := range []string{"alice", "bob"} {
		if r := cli(who, "proposals", "approve", id); r.code != 0 {
			t.Fatalf("approve as %s: %+v", who, r)
		}
	}
	ruleID := "r-" + strings.TrimPrefix(id, "p-")
	r = cli("alice", "export")
	lines := jsonLines(t, r.stdout)
	exported := ofKind(lines, "rule_effect")
	l := cli("viewer", "-o", "json", "rules", "effect", "--retired")
	var listed struct{ Effects []map[string]any }
	if r.code != 0 || l.code != 0 || json.Unmarshal([]byte(l.stdout), &listed) != nil {
		t.Fatalf("export %+v; effect %+v", r, l)
	}
	if len(exported) != 1 || len(listed.Effects) != 1 || exported[0]["rule_id"] != ruleID {
		t.Fatalf("exported %v, listed %v", exported, listed.Effects)
	}
	// Both are computed when asked for.
	delete(exported[0], "kind")
	delete(exported[0], "computed_at")
	delete(listed.Effects[0], "computed_at")
	if a, b := fmt.Sprint(exported[0]), fmt.Sprint(listed.Effects[0]); a != b {
		t.Fatalf("exported\n%s\nlisted\n%s", a, b)
	}
	if notes := lines[len(lines)-1]["notes"]; notes != nil {
		t.Fatalf("notes with the loop on: %v", notes)
	}

	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
redis: {addr: %q, block: 100ms}
effects: {enabled: false}
auth: {tokens: [{name: ops, role: admin, token: %s}]}
`, t.TempDir(), testenv.Redis(t), adminToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	off := startApp(t, cfg)
	r = run("", "--addr", off.URL(), "--token", adminToken, "export")
	lines = jsonLines(t, r.stdout)
	if r.code != 0 || !strings.Contains(fmt.Sprint(lines[len(lines)-1]["notes"]), "rule effects are not computed by this server") {
		t.Fatalf("export with the loop off: %+v", r)
	}
}
