package llm

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// vectorFor is a canned embedding: not normalised, so the adapter's
// normalisation shows.
func vectorFor(text string) []float32 {
	return []float32{float32(len(text)), 3, 4}
}

func openAIServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/embeddings":
			var req struct{ Input []string }
			json.NewDecoder(r.Body).Decode(&req)
			var data []map[string]any
			for i, in := range req.Input {
				data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": vectorFor(in)})
			}
			json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": "e", "usage": map[string]int{}})
		case "/v1/chat/completions":
			json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
				"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "pong"}}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func ollamaServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/embed":
			var req struct{ Input string }
			json.NewDecoder(r.Body).Decode(&req)
			json.NewEncoder(w).Encode(map[string]any{"embeddings": [][]float32{vectorFor(req.Input)}})
		case "/api/chat":
			json.NewEncoder(w).Encode(map[string]any{"model": "m", "created_at": time.Now(), "message": map[string]any{"role": "assistant", "content": "pong"}, "done": true})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestModelsAndEmbeddersOfBothProviders(t *testing.T) {
	ctx := context.Background()
	oa, ol := openAIServer(t), ollamaServer(t)
	for _, p := range []Provider{
		{Provider: "openai", Model: "m", BaseURL: oa.URL + "/v1", APIKey: "sk-test", Timeout: 5 * time.Second},
		{Provider: "ollama", Model: "m", BaseURL: ol.URL, Timeout: 5 * time.Second},
	} {
		t.Run(p.Provider, func(t *testing.T) {
			m, err := NewModel(p)
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.Complete(ctx, "ping")
			if err != nil || out != "pong" {
				t.Fatalf("Complete = %q, %v", out, err)
			}
			if m.Model() != p.Provider+"/m" {
				t.Fatalf("Model() = %q", m.Model())
			}
			e, err := NewEmbedder(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if e.Dimension() != 3 || e.Name() != p.Provider+":m" {
				t.Fatalf("embedder %s/%d", e.Name(), e.Dimension())
			}
			vecs, err := e.Embed(ctx, []string{"hello", "", "hello world"})
			if err != nil {
				t.Fatal(err)
			}
			var norm float64
			for _, x := range vecs[0] {
				norm += float64(x) * float64(x)
			}
			if math.Abs(norm-1) > 1e-5 {
				t.Fatalf("vector not normalised: %v", vecs[0])
			}
			if vecs[1][0] != 0 || vecs[1][1] != 0 || vecs[1][2] != 0 {
				t.Fatalf("empty text embedded as %v, want the zero vector without a request", vecs[1])
			}
		})
	}
}

func TestNoneMeansNoModelAndBadCredentialsFailAtStart(t *testing.T) {
	if m, err := NewModel(Provider{Provider: "none"}); m != nil || err != nil {
		t.Fatalf("provider none = %v, %v", m, err)
	}
	oa := openAIServer(t)
	_, err := NewEmbedder(context.Background(), Provider{Provider: "openai", Model: "m", BaseURL: oa.URL + "/v1", APIKey: "wrong", Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "openai/m") {
		t.Fatalf("bad key at start: %v", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatal("the API key leaked into the error")
	}
}
