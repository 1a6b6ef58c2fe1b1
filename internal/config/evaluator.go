package config

import (
	"fmt"
	"github.com/precept-dev/precept/lib/embedding"
	"net/url"
	"time"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/lib/vectorindex/chroma"
)

// Evaluator configures similarity, clustering and classification
// (docs/thresholds.md). Every threshold is configurable.
type Evaluator struct {
	// Enabled runs the evaluator on every ingested decision.
	Enabled bool `yaml:"enabled"`
	// SimilarityThreshold is the cosine similarity from which feedback is
	// "similar" (FindSimilar's default and the clustering threshold).
	SimilarityThreshold float64 `yaml:"similarity_threshold"`
	// MaxSimilar bounds how many similar ids an evaluation lists.
	MaxSimilar int      `yaml:"max_similar"`
	Index      Index    `yaml:"index"`
	Embedder   Provider `yaml:"embedder"`
	LLM        Provider `yaml:"llm"`
	// RubricFile is a YAML clarity rubric, re-read when it changes; empty
	// uses the built-in rubric.
	RubricFile string `yaml:"rubric_file"`
	// TaxonomyFile is a curator's taxonomy that extends the embedded one
	// (docs/lessons.md), re-read when it changes; empty uses the embedded
	// taxonomy alone.
	TaxonomyFile string `yaml:"taxonomy_file"`
	// LinkageThreshold is the mean similarity to a cluster's members, within
	// one agent and category, from which a decision joins it.
	LinkageThreshold float64 `yaml:"linkage_threshold"`
	// ReclusterEvery is how often the changed groups are re-clustered;
	// 0 never (on demand only).
	ReclusterEvery time.Duration `yaml:"recluster_every"`
	// ReclusterEveryDecisions paces re-clustering by the feedback
	// history instead of the clock: a pass after every so many decisions,
	// so that nodes evaluating one feedback repository reach the same
	// clusters (docs/decisions/0019). 0 chooses: DefaultPassEvery when
	// feedback.git.remote_url is set, the clock otherwise; -1 the clock
	// always.
	ReclusterEveryDecisions int        `yaml:"recluster_every_decisions"`
	Thresholds              Thresholds `yaml:"thresholds"`
	// ArtifactsRoot is where correction_diff_path files are read from;
	// empty ignores such paths.
	ArtifactsRoot string `yaml:"artifacts_root"`
}

// Thresholds decide when a cluster is generalizable (docs/thresholds.md): they
// count distinct reviewers and epics, never raw totals alone.
type Thresholds struct {
	LowMinSize       int `yaml:"low_min_size"`
	LowMinReviewers  int `yaml:"low_min_reviewers"`
	HighMinSize      int `yaml:"high_min_size"`
	HighMinReviewers int `yaml:"high_min_reviewers"`
	HighMinEpics     int `yaml:"high_min_epics"`
	// HighMinProducers is the least number of distinct producers (API
	// tokens or streams) a high cluster needs; 1 means no requirement.
	HighMinProducers int `yaml:"high_min_producers"`
}

// Index selects the vector index backend.
type Index struct {
	// Backend is embedded (lib/vectorindex/chromem under the data dir) or chroma.
	Backend string `yaml:"backend"`
	Chroma  Chroma `yaml:"chroma"`
}

// Chroma locates a Chroma server.
type Chroma struct {
	URL              string `yaml:"url"`
	Tenant           string `yaml:"tenant"`
	Database         string `yaml:"database"`
	CollectionPrefix string `yaml:"collection_prefix"`
	// Token; env PRECEPT_CHROMA_TOKEN overrides it.
	Token   string        `yaml:"token"`
	Timeout time.Duration `yaml:"timeout"`
}

// Provider configures a langchaingo model (internal/llm): an embedder or
// an LLM.
type Provider struct {
	// Provider is local (embedder only), none (LLM only), openai (any
	// OpenAI-compatible endpoint: vLLM, llama.cpp, Ollama's /v1, hosted)
	// or ollama.
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	BaseURL  string `yaml:"base_url"`
	// APIKey; env PRECEPT_EMBEDDER_API_KEY / PRECEPT_LLM_API_KEY override.
	APIKey      string        `yaml:"api_key"`
	Timeout     time.Duration `yaml:"timeout"`
	Temperature float64       `yaml:"temperature"`
	// Dimension of the local embedder; 0 means its default.
	Dimension int `yaml:"dimension"`
}

func defaultEvaluator() Evaluator {
	t := evaluator.DefaultThresholds()
	return Evaluator{
		Enabled:             true,
		SimilarityThreshold: evaluator.DefaultSimilarityThreshold,
		LinkageThreshold:    evaluator.DefaultLinkageThreshold,
		ReclusterEvery:      evaluator.DefaultReclusterEvery,
		MaxSimilar:          evaluator.DefaultMaxSimilar,
		Index: Index{Backend: "embedded", Chroma: Chroma{
			Tenant: chroma.DefaultTenant, Database: chroma.DefaultDatabase, CollectionPrefix: chroma.DefaultCollectionPrefix,
			// preceptd's own choice; chroma.DefaultTimeout is longer.
			Timeout: 10 * time.Second,
		}},
		Embedder: Provider{Provider: "local", Timeout: 30 * time.Second},
		// The LLM serves the evaluator and the rule drafter; both wait
		// llm.timeout for it.
		LLM: Provider{Provider: "none", Timeout: evaluator.DefaultLLMTimeout},
		Thresholds: Thresholds{
			LowMinSize: t.LowMinSize, LowMinReviewers: t.LowMinReviewers,
			HighMinSize: t.HighMinSize, HighMinReviewers: t.HighMinReviewers, HighMinEpics: t.HighMinEpics,
			HighMinProducers: max(t.HighMinProducers, 1),
		},
	}
}

func (e Evaluator) validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: evaluator.%s: %s", key, fmt.Sprintf(format, args...))
	}
	if e.SimilarityThreshold <= 0 || e.SimilarityThreshold > 1 {
		return bad("similarity_threshold", "%v is outside (0, 1]", e.SimilarityThreshold)
	}
	if e.LinkageThreshold <= 0 || e.LinkageThreshold > 1 {
		return bad("linkage_threshold", "%v is outside (0, 1]", e.LinkageThreshold)
	}
	if e.ReclusterEvery < 0 || (e.ReclusterEvery > 0 && e.ReclusterEvery < time.Second) {
		return bad("recluster_every", "%v: use 0 (on demand only) or at least 1s", e.ReclusterEvery)
	}
	if e.ReclusterEveryDecisions < -1 || e.ReclusterEveryDecisions > 10_000_000 {
		return bad("recluster_every_decisions", "%d: use -1 (the clock), 0 (chosen by feedback.git.remote_url) or 1..10000000", e.ReclusterEveryDecisions)
	}
	if e.MaxSimilar < 1 || e.MaxSimilar > 100 {
		return bad("max_similar", "%d is outside 1..100", e.MaxSimilar)
	}
	switch e.Index.Backend {
	case "embedded":
	case "chroma":
		if u, err := url.Parse(e.Index.Chroma.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("index.chroma.url", "%q is not an http(s) URL", e.Index.Chroma.URL)
		}
	default:
		return bad("index.backend", "%q is not embedded or chroma", e.Index.Backend)
	}
	switch e.Embedder.Provider {
	case "local":
		if err := (embedding.LocalOptions{Dimension: e.Embedder.Dimension}).Validate(); err != nil {
			return bad("embedder.dimension", "%d is outside %d..%d", e.Embedder.Dimension, embedding.MinLocalDimension, embedding.MaxLocalDimension)
		}
	case "openai", "ollama":
		if e.Embedder.Model == "" {
			return bad("embedder.model", "required for provider %s", e.Embedder.Provider)
		}
	default:
		return bad("embedder.provider", "%q is not local, openai or ollama", e.Embedder.Provider)
	}
	switch e.LLM.Provider {
	case "none", "": // empty: no LLM, as "none"
	case "openai", "ollama":
		if e.LLM.Model == "" {
			return bad("llm.model", "required for provider %s", e.LLM.Provider)
		}
	default:
		return bad("llm.provider", "%q is not none, openai or ollama", e.LLM.Provider)
	}
	for key, p := range map[string]Provider{"embedder": e.Embedder, "llm": e.LLM} {
		if p.BaseURL != "" {
			if u, err := url.Parse(p.BaseURL); err != nil || u.Host == "" {
				return bad(key+".base_url", "%q is not a URL", p.BaseURL)
			}
		}
		if p.Timeout <= 0 {
			return bad(key+".timeout", "must be a positive duration")
		}
	}
	t := e.Thresholds
	for key, v := range map[string]int{"low_min_size": t.LowMinSize, "low_min_reviewers": t.LowMinReviewers,
		"high_min_size": t.HighMinSize, "high_min_reviewers": t.HighMinReviewers, "high_min_epics": t.HighMinEpics,
		"high_min_producers": t.HighMinProducers} {
		if v < 1 || v > 1000 {
			return bad("thresholds."+key, "%d is outside 1..1000", v)
		}
	}
	if t.HighMinSize < t.LowMinSize || t.HighMinReviewers < t.LowMinReviewers {
		return bad("thresholds", "high thresholds must not be below low ones")
	}
	return nil
}
