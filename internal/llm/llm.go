// Package llm adapts langchaingo models to precept: an LLM for the
// evaluator and the rule drafter, and embedders for the similarity index.
// Providers are any OpenAI-compatible endpoint (vLLM, llama.cpp server,
// Ollama's /v1, hosted APIs) and Ollama's native API. Nothing is
// downloaded: the models run where the configuration points.
package llm

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
)

// Provider says which model to use and how to reach it (the
// configuration's evaluator.llm and evaluator.embedder).
type Provider struct {
	// Provider is openai (any OpenAI-compatible endpoint) or ollama; for
	// NewModel, none or empty means no model.
	Provider string
	Model    string
	// BaseURL overrides the provider's default endpoint.
	BaseURL string
	// APIKey is sent as the bearer token; it never appears in errors.
	APIKey string
	// Timeout bounds each HTTP request.
	Timeout     time.Duration
	Temperature float64
}

// Model is a text-completion model.
type Model struct {
	llm         llms.Model
	name        string
	temperature float64
}

// client is what both langchaingo providers implement.
type client interface {
	llms.Model
	CreateEmbedding(ctx context.Context, texts []string) ([][]float32, error)
}

func newClient(p Provider, embeddingModel bool) (client, error) {
	hc := &http.Client{Timeout: p.Timeout}
	switch p.Provider {
	case "openai":
		opts := []openai.Option{openai.WithHTTPClient(hc), openai.WithModel(p.Model)}
		if embeddingModel {
			opts = append(opts, openai.WithEmbeddingModel(p.Model))
		}
		if p.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(p.BaseURL))
		}
		// langchaingo refuses to start without a token; local
		// OpenAI-compatible servers ignore it.
		token := p.APIKey
		if token == "" {
			token = "unused"
		}
		opts = append(opts, openai.WithToken(token))
		c, err := openai.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("openai client: %w", err)
		}
		return c, nil
	case "ollama":
		opts := []ollama.Option{ollama.WithModel(p.Model), ollama.WithHTTPClient(hc)}
		if p.BaseURL != "" {
			opts = append(opts, ollama.WithServerURL(p.BaseURL))
		}
		c, err := ollama.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("ollama client: %w", err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("unsupported provider %q", p.Provider)
}

// NewModel returns the LLM the configuration names, or nil for provider
// "none".
func NewModel(p Provider) (*Model, error) {
	if p.Provider == "none" || p.Provider == "" {
		return nil, nil
	}
	c, err := newClient(p, false)
	if err != nil {
		return nil, err
	}
	return &Model{llm: c, name: p.Provider + "/" + p.Model, temperature: p.Temperature}, nil
}

// Complete sends one prompt and returns the answer text.
func (m *Model) Complete(ctx context.Context, prompt string) (string, error) {
	out, err := llms.GenerateFromSinglePrompt(ctx, m.llm, prompt, llms.WithTemperature(m.temperature))
	if err != nil {
		return "", fmt.Errorf("%s: %w", m.name, err)
	}
	return out, nil
}

// Model names the model, e.g. "openai/gpt-4o-mini".
func (m *Model) Model() string { return m.name }

// Embedder embeds texts with a remote model. Its vectors are normalised,
// so cosine similarity is their dot product.
type Embedder struct {
	e    *embeddings.EmbedderImpl
	name string
	dim  int
}

// NewEmbedder connects to the embedding model and learns its dimension by
// embedding a probe text, so a misconfigured model fails at start.
func NewEmbedder(ctx context.Context, p Provider) (*Embedder, error) {
	c, err := newClient(p, true)
	if err != nil {
		return nil, err
	}
	e, err := embeddings.NewEmbedder(c, embeddings.WithBatchSize(64), embeddings.WithStripNewLines(false))
	if err != nil {
		return nil, err
	}
	probe, err := e.EmbedDocuments(ctx, []string{"dimension probe"})
	if err != nil {
		return nil, fmt.Errorf("embedding model %s/%s: %w", p.Provider, p.Model, err)
	}
	if len(probe) != 1 || len(probe[0]) == 0 {
		return nil, fmt.Errorf("embedding model %s/%s returned no vector", p.Provider, p.Model)
	}
	return &Embedder{e: e, name: p.Provider + ":" + p.Model, dim: len(probe[0])}, nil
}

// Name identifies the model; the index re-indexes when it changes.
func (e *Embedder) Name() string { return e.name }

// Dimension is the model's vector length.
func (e *Embedder) Dimension() int { return e.dim }

// Embed returns one normalised vector per text. Empty texts get a zero
// vector without a request, as the local embedder does.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var idx []int
	var send []string
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			out[i] = make([]float32, e.dim)
			continue
		}
		idx = append(idx, i)
		send = append(send, t)
	}
	if len(send) == 0 {
		return out, nil
	}
	vecs, err := e.e.EmbedDocuments(ctx, send)
	if err != nil {
		return nil, fmt.Errorf("embed with %s: %w", e.name, err)
	}
	if len(vecs) != len(send) {
		return nil, fmt.Errorf("embed with %s: %d vectors for %d texts", e.name, len(vecs), len(send))
	}
	for j, v := range vecs {
		if len(v) != e.dim {
			return nil, fmt.Errorf("embed with %s: a %d-dimensional vector, expected %d", e.name, len(v), e.dim)
		}
		out[idx[j]] = normalize(v)
	}
	return out, nil
}

func normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.IsNaN(sum) {
		return v
	}
	n := float32(1 / math.Sqrt(sum))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * n
	}
	return out
}
