package impact

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// fixtureRow is one decision of testdata/decisions.jsonl with what the
// evaluator concluded about it.
type fixtureRow struct {
	Note      string           `json:"note"`
	Decision  precept.Decision `json:"decision"`
	Cluster   string           `json:"cluster"`
	Category  string           `json:"category"`
	Evaluated bool             `json:"evaluated"`
}

func loadRows(t testing.TB) []fixtureRow {
	t.Helper()
	f, err := os.Open("testdata/decisions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []fixtureRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r fixtureRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// evaluations is the evaluator's conclusions as the fixture states
// them: the classes and clusters a real evaluator reaches depend on its
// thresholds, and the counts here must be checkable by hand.
type evaluations struct {
	evals    map[string]evaluator.Evaluation
	clusters map[string]evaluator.ClusterView
}

func (e *evaluations) Evaluation(_ context.Context, id string) (evaluator.Evaluation, string, error) {
	ev, ok := e.evals[id]
	if !ok {
		return evaluator.Evaluation{}, "", precept.Errorf(precept.NotFound, "decision %q has no evaluation yet", id)
	}
	return ev, "", nil
}

func (e *evaluations) EachPlacement(ctx context.Context, ids [][]byte, fn func(i int, cluster, category []byte, ok bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, id := range ids {
		ev, ok := e.evals[string(id)]
		if !ok {
			fn(i, nil, nil, false)
			continue
		}
		category := ""
		if ev.Lesson != nil {
			category = ev.Lesson.Category
		}
		fn(i, []byte(ev.ClusterID), []byte(category), true)
	}
	return nil
}

func (e *evaluations) Cluster(_ context.Context, id string) (evaluator.ClusterView, error) {
	c, ok := e.clusters[id]
	if !ok {
		return evaluator.ClusterView{}, precept.Errorf(precept.NotFound, "cluster %q not found", id)
	}
	return c, nil
}

type proposals struct{ list []rulefmt.Proposal }

func (p *proposals) List(context.Context, rules.ListFilter) ([]rulefmt.Proposal, error) {
	return p.list, nil
}

// env is a real feedback store holding the fixture, a real rules
// repository with guidance on main read by a real prompt assembler, and
// the fixture's evaluations.
type env struct {
	sources  Sources
	feedback *feedbackstore.Store
	proposal rulefmt.Proposal
}

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// The rule of the fixture's proposal, and guidance on main.
const (
	ruleText     = "Always set a timeout on outbound HTTP calls and retry them with backoff."
	opposingText = "Never set a timeout on outbound HTTP calls and never retry them with backoff."
)

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	frepo, err := gitrepo.Open(filepath.Join(dir, "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { frepo.Close() })
	store, err := feedbackstore.Open(frepo, filepath.Join(dir, "feedback.db"), feedbackstore.Options{BatchWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ev := &evaluations{evals: map[string]evaluator.Evaluation{}, clusters: map[string]evaluator.ClusterView{}}
	var records []precept.Feedback
	for _, r := range loadRows(t) {
		if err := r.Decision.Validate(precept.Limits{}, t0); err != nil {
			t.Fatalf("%s: %v", r.Decision.DecisionID, err)
		}
		records = append(records, precept.NewFeedback(r.Decision, "api:test", t0))
		if !r.Evaluated {
			continue
		}
		e := evaluator.Evaluation{DecisionID: r.Decision.DecisionID, Class: evaluator.Positive, ClusterID: r.Cluster}
		if r.Category != "" {
			e.Class = evaluator.GeneralizableLow
			e.Lesson = &lesson.Lesson{Category: r.Category}
		}
		ev.evals[r.Decision.DecisionID] = e
		if r.Cluster != "" {
			ev.clusters[r.Cluster] = evaluator.ClusterView{Cluster: evaluator.Cluster{ID: r.Cluster, Category: r.Category, Agent: r.Decision.Agent}}
		}
	}
	if _, err := store.Store(ctx, records); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}

	rrepo, err := gitrepo.Open(filepath.Join(dir, "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rrepo.Close() })
	files := map[string]string{
		"prompts/coder.md":                           "You are a coding agent. Write Go.\n",
		"prompts/review.md":                          "# Review\n\n" + opposingText + "\n",
		"prompts/src/api/_rules.md":                  "# API\n\n- " + ruleText + "\n- Keep handlers small.\n",
		"prompts/src/docs/_rules.md":                 "Write in plain English.\n",
		rulefmt.ActiveRulePath("coder", "r-keep1"):   ruleFile(t, "r-keep1", "Keep functions short."),
		rulefmt.ActiveRulePath("coder", "r-same1"):   ruleFile(t, "r-same1", ruleText),
		rulefmt.ActiveRulePath("planner", "r-plan1"): ruleFile(t, "r-plan1", ruleText),
	}
	var changes []gitrepo.Change
	for p, c := range files {
		changes = append(changes, gitrepo.Change{Path: p, Data: []byte(c)})
	}
	if _, err := rrepo.Update(ctx, "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "guidance", Changes: changes}, nil
	}); err != nil {
		t.Fatal(err)
	}
	asm, err := prompts.New(rrepo, prompts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := rulefmt.Proposal{ID: "p-c1impact", Status: rulefmt.Pending, Revision: 3, ContentRevision: 2, Agents: []string{"coder"},
		ClusterID: "C1", EvidenceClusters: []string{"C2"}, FeedbackIDs: []string{"n1", "n2", "n3"}, Content: ruleText, RuleID: "r-c1impact"}
	return &env{
		sources: Sources{Proposals: &proposals{list: []rulefmt.Proposal{p}}, Feedback: store, Evaluations: ev,
			Lessons: lesson.DefaultSource(), Documents: asm, Embedder: embedding.NewLocal(embedding.LocalOptions{})},
		feedback: store, proposal: p,
	}
}

func ruleFile(t testing.TB, id, content string) string {
	t.Helper()
	b, err := rulefmt.Rule{ID: id, Type: rulefmt.Guideline, Status: rulefmt.Active, Content: content}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// llmServer speaks the OpenAI chat-completions API, answering each
// prompt with what answer returns for it, and counts the calls.
type llmServer struct {
	*httptest.Server
	mu      sync.Mutex
	prompts []string
}

// reply is a canned answer: its text, a delay past the call timeout, or
// an HTTP error status.
type reply struct {
	text   string
	delay  time.Duration
	status int
}

func newLLMServer(t testing.TB, answer func(prompt string) reply) *llmServer {
	s := &llmServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content any `json:"content"`
			} `json:"messages"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		prompt := fmt.Sprint(req.Messages[0].Content)
		s.mu.Lock()
		s.prompts = append(s.prompts, prompt)
		s.mu.Unlock()
		a := answer(prompt)
		if a.status != 0 {
			http.Error(w, "unavailable", a.status)
			return
		}
		select {
		case <-time.After(a.delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "cmpl-1", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": a.text}}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *llmServer) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prompts...)
}

// byMarker answers by the marker in the agent output: BAD and OK-1 are
// violations, OK-2 gets prose instead of JSON, SLOW never answers in
// time.
func byMarker(prompt string) reply {
	switch {
	case strings.Contains(prompt, "SLOW"):
		return reply{text: `{"violates": true, "reason": "late"}`, delay: 5 * time.Second}
	case strings.Contains(prompt, "BAD"), strings.Contains(prompt, "OK-1"):
		return reply{text: "```json\n{\"violates\": true, \"reason\": \"no timeout\"}\n```"}
	case strings.Contains(prompt, "OK-2"):
		return reply{text: "I think it is probably fine."}
	}
	return reply{text: `{"violates": false, "reason": "follows the rule"}`}
}
