package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/prompts"
)

// openPrompts starts prompt assembly on the rules repository's main
// branch and serves PromptService. Run follows main (App.Prompts.Run);
// whoever commits to main in this process calls App.Prompts.Notify so
// watchers hear of it at once rather than at the next poll.
func (a *App) openPrompts() error {
	c := a.Config.Prompts
	p, err := prompts.New(a.RulesRepo, prompts.Options{
		Branch:       a.RulesRepo.DefaultBranch(),
		MaxRules:     c.MaxRules,
		PollInterval: c.WatchPoll,
		CacheSize:    c.CacheSize,
		Logger:       a.Log.With("component", "prompts"),
		Denylist:     a.Config.Rules.Quality.Denylist,
		OnAssembled:  a.onAssembled(),
	})
	if err != nil {
		return err
	}
	a.Prompts = p
	a.Registry.MustRegister(promptCollectors(p)...)
	opts := append(a.ConnectOptions(), api.PromptCompression())
	a.Handle(preceptv1connect.NewPromptServiceHandler(&api.PromptService{Prompts: p, Versions: a.Versions, Log: a.Log}, opts...))
	return nil
}

// onAssembled records each newly assembled prompt's versions, when the
// learning loop is on.
func (a *App) onAssembled() func(prompts.Request, *prompts.Prompt) {
	if a.Versions == nil {
		return nil
	}
	return a.Versions.Observe
}

// promptCollectors export the assembler's counters; they are read at
// scrape time, so the hot path only bumps atomics.
func promptCollectors(p *prompts.Assembler) []prometheus.Collector {
	counter := func(name, help string, v func(prompts.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(p.Stats())) })
	}
	gauge := func(name, help string, v func(prompts.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(p.Stats()) })
	}
	return []prometheus.Collector{
		counter("precept_prompt_cache_hits_total", "Prompt requests answered from the cache.", func(s prompts.Stats) uint64 { return s.CacheHits }),
		counter("precept_prompt_cache_misses_total", "Prompt requests that assembled a prompt.", func(s prompts.Stats) uint64 { return s.CacheMisses }),
		counter("precept_prompt_index_rebuilds_total", "Rules-repository commits prompt assembly moved to.", func(s prompts.Stats) uint64 { return s.Rebuilds }),
		counter("precept_prompt_refresh_errors_total", "Failed reads of the rules repository; the last good commit stays served.", func(s prompts.Stats) uint64 { return s.RefreshErrors }),
		gauge("precept_prompt_cached", "Prompts cached for the current commit.", func(s prompts.Stats) float64 { return float64(s.CachedPrompts) }),
		gauge("precept_prompt_watchers", "Open WatchPrompt streams.", func(s prompts.Stats) float64 { return float64(s.Watchers) }),
	}
}
