package evaluator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept/internal/llm"
)

// openAIServer speaks the OpenAI chat-completions API with a canned
// answer, recording the prompts it was sent.
type openAIServer struct {
	*httptest.Server
	mu      sync.Mutex
	answer  string
	status  int
	delay   time.Duration
	prompts []string
	// lesson, when set, answers lesson-extraction prompts.
	lesson string
}

func newOpenAIServer(t *testing.T) *openAIServer {
	s := &openAIServer{status: 200}
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
		json.Unmarshal(body, &req)
		s.mu.Lock()
		answer, status, delay := s.answer, s.status, s.delay
		if len(req.Messages) > 0 {
			prompt := fmt.Sprint(req.Messages[0].Content)
			s.prompts = append(s.prompts, prompt)
			if s.lesson != "" && strings.Contains(prompt, "Reduce it to a lesson") {
				answer = s.lesson
			}
		}
		s.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		if status != 200 {
			http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "cmpl-1", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": answer}}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *openAIServer) set(answer string, status int, delay time.Duration) {
	s.mu.Lock()
	s.answer, s.status, s.delay = answer, status, delay
	s.mu.Unlock()
}

func TestTheLLMMayExplainOrDowngradeButNeverUpgradeAndFailsOpen(t *testing.T) {
	srv := newOpenAIServer(t)
	model, err := llm.NewModel(llm.Provider{Provider: "openai", Model: "test-model", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{LLM: model, LLMTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	// Two stored decisions, so a third similar one is GENERALIZABLE_HIGH.
	feed.add(neg("a", "alice", "E1", "Hardcoded API key in config.go; load secrets from the environment."),
		neg("b", "bob", "E2", "API key is hardcoded in the config file, read it from an env var instead."))
	srv.set(`{"classification":"EDGE_CASE","confidence":0.7,"rationale":"seeding"}`, 200, 0)
	e.drain(t)
	high := neg("c", "carol", "E3", "Secret key hardcoded in config; use environment variables.").Decision
	edge := neg("z", "zed", "E9", "The changelog entry uses past tense; our style guide wants the imperative mood.").Decision

	tests := []struct {
		name      string
		answer    string
		status    int
		delay     time.Duration
		decision  string
		wantClass Class
		wantBy    string
		rationale string
	}{
		{"good JSON downgrades", "```json\n{\"classification\":\"GENERALIZABLE_LOW\",\"confidence\":0.66,\"rationale\":\"Two of three comments are about one service.\"}\n```",
			200, 0, "high", GeneralizableLow, "llm:openai/test-model", "Lowered by an LLM from GENERALIZABLE_HIGH"},
		{"good JSON agrees and explains", `{"classification":"GENERALIZABLE_HIGH","confidence":0.9,"rationale":"Three reviewers flag hardcoded secrets."}`,
			200, 0, "high", GeneralizableHigh, "llm:openai/test-model", "Three reviewers flag hardcoded secrets."},
		{"malformed JSON falls back", `{"classification": "GENERALIZABLE_LOW", "confidence": }`,
			200, 0, "high", GeneralizableHigh, "deterministic", "Generalizable (high)"},
		{"unknown class falls back", `{"classification":"URGENT","confidence":0.9,"rationale":"x"}`,
			200, 0, "high", GeneralizableHigh, "deterministic", "Generalizable (high)"},
		{"server error falls back", "", 500, 0, "high", GeneralizableHigh, "deterministic", "Generalizable (high)"},
		{"timeout falls back", `{"classification":"EDGE_CASE","confidence":0.9,"rationale":"late"}`,
			200, 2 * time.Second, "high", GeneralizableHigh, "deterministic", "Generalizable (high)"},
		{"an upgrade is refused", `{"classification":"GENERALIZABLE_HIGH","confidence":0.99,"rationale":"This is clearly a pattern."}`,
			200, 0, "edge", EdgeCase, "deterministic", "which the statistics do not support"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.set(tt.answer, tt.status, tt.delay)
			d := high
			if tt.decision == "edge" {
				d = edge
			}
			start := time.Now()
			ev, err := e.svc.Evaluate(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Class != tt.wantClass || ev.Evaluator != tt.wantBy || !strings.Contains(ev.Rationale, tt.rationale) {
				t.Fatalf("got %s by %s: %q", ev.Class, ev.Evaluator, ev.Rationale)
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("the LLM timeout was not enforced: %s", time.Since(start))
			}
		})
	}
	srv.mu.Lock()
	last := srv.prompts[len(srv.prompts)-1]
	srv.mu.Unlock()
	for _, want := range []string{"at most this classification: EDGE_CASE", "imperative mood", "never raise it"} {
		if !strings.Contains(last, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, last)
		}
	}
}

func TestExtractJSONFindsTheObjectInProse(t *testing.T) {
	for in, want := range map[string]string{
		`sure: {"a":"}"} done`:            `{"a":"}"}`,
		"```json\n{\"a\":{\"b\":1}}\n```": `{"a":{"b":1}}`,
		`no object`:                       ``,
		`{"unterminated": 1`:              ``,
		`{"esc":"a\"}b"}`:                 `{"esc":"a\"}b"}`,
	} {
		if got := extractJSON(in); got != want {
			t.Errorf("extractJSON(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTheLLMExtractsLessonsWithinTheTaxonomyAndFailsOpen(t *testing.T) {
	srv := newOpenAIServer(t)
	model, err := llm.NewModel(llm.Provider{Provider: "openai", Model: "test-model", BaseURL: srv.URL + "/v1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, t.TempDir(), newFeed(), Options{LLM: model, LLMTimeout: 300 * time.Millisecond, Lessons: curatorLessons(t)})
	ctx := context.Background()
	srv.set(`{"classification":"EDGE_CASE","confidence":0.7,"rationale":"fine"}`, 200, 0)
	d := neg("a", "alice", "E1", "zorblax frobnicates the wibbler backwards; unfrob it").Decision
	for _, tt := range []struct {
		name, answer, category, by, proposed string
		class                                Class
	}{
		{"moved within the taxonomy", `{"category":"quux-problem","problem":"Totals are rounded wrong.","desired":"Round totals with decimals."}`, "quux-problem", "llm:openai/test-model", "", EdgeCase},
		{"unknown category falls back", `{"category":"made-up","problem":"p","desired":"d"}`, "zorb-problem", "deterministic", "", EdgeCase},
		{"malformed falls back", `{"category":`, "zorb-problem", "deterministic", "", EdgeCase},
		{"a new category is proposed", `{"category":"new:cache-freshness","problem":"Caches serve stale entries.","desired":"Refresh caches."}`, "zorb-problem", "deterministic", "cache-freshness: Caches serve stale entries.", EdgeCase},
		{"unclear is ambiguous", `{"category":"unclear","problem":"","desired":""}`, "unclear", "llm:openai/test-model", "", Ambiguous},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv.mu.Lock()
			srv.lesson = tt.answer
			srv.mu.Unlock()
			ev, err := e.svc.Evaluate(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			l := ev.Lesson
			if l == nil || l.Category != tt.category || l.By != tt.by || l.Proposed != tt.proposed || ev.Class != tt.class {
				t.Fatalf("class %s, lesson %+v", ev.Class, l)
			}
			if tt.category == "quux-problem" && (l.Problem != "Totals are rounded wrong." || l.Desired != "Round totals with decimals.") {
				t.Fatalf("problem/desired not taken: %+v", l)
			}
		})
	}
}
