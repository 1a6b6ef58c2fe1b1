package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/internal/testenv"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules"
)

// BenchmarkLearningLoopCost measures what the learning loop costs
// ingestion: ingest+classify on the embedded defaults at 10k and 100k
// stored decisions, in the same run with the loop off and on
// (effects.enabled; analytics too once it exists). With the loop on, every
// agent has two active rules, the decisions carry their agent's recorded
// prompt_version, and a full effects round runs before each measurement,
// so attribution has rules, versions and facts to work through. Reported:
// decisions/s per variant and size, the ratio on/off, and how long a full
// effects round took.
func BenchmarkLearningLoopCost(b *testing.B) {
	sizes := []int{10000, 100000}
	if os.Getenv("PRECEPT_BENCH_SIZES") == "10000" {
		sizes = sizes[:1]
	}
	rates := map[string]map[int]float64{}
	for _, variant := range []string{"off", "on"} {
		rates[variant] = map[int]float64{}
		redisAddr := testenv.Redis(b)
		rdb := testenv.RedisClient(b, redisAddr)
		loop := "effects: {enabled: false}"
		if variant == "on" {
			loop = "effects: {enabled: true}"
		}
		cfg, err := config.Parse(fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nnode: bench\nredis: {addr: %q}\n%s\n", b.TempDir(), redisAddr, loop))
		if err != nil {
			b.Fatal(err)
		}
		a, err := New(b.Context(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		g := newFeedbackGen(b)
		if variant == "on" {
			g.versions = map[string]string{}
			for i, agent := range genAgents {
				for j := range 2 {
					id := fmt.Sprintf("r-bench%d%d", i, j)
					benchRule(b, a, agent, id, fmt.Sprintf("Rule %d for %s: keep functions short and tested.", j, agent), []string{"tests-missing", "errors-ignored"}[j])
				}
			}
			a.Prompts.Notify()
			time.Sleep(500 * time.Millisecond)
			for _, agent := range genAgents {
				p, err := a.Prompts.Build(context.Background(), prompts.Request{Agent: agent, Stage: "implement", BasePrompt: new("You write Go.")})
				if err != nil || len(p.RuleIDs) != 2 {
					b.Fatalf("prompt for %s: %v, rules %v", agent, err, p)
				}
				g.versions[agent] = p.Version
			}
		}
		stored := 0
		for _, size := range sizes {
			fillAndEvaluate(b, a, g, stored, size)
			stored = size
			if a.Effects != nil {
				if _, err := a.Effects.CatchUp(context.Background()); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				rep, err := a.Effects.Round(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), fmt.Sprintf("effects-round-s@%dk", size/1000))
				b.Logf("effects round at %d stored: %d rules in %s", size, len(rep.Effects), time.Since(start).Round(time.Millisecond))
			}
			rate := ingestClassifyRate(b, a, rdb, g, fmt.Sprintf("live%s%d", variant, size), 5000)
			stored += 5000
			rates[variant][size] = rate
			b.ReportMetric(rate, fmt.Sprintf("ingest+classify/s-%s@%dk", variant, size/1000))
			b.Logf("learning loop %s, %d stored: ingest+classify %.0f decisions/s", variant, size, rate)
		}
		cancel()
		<-done
		a.Close()
	}
	for _, size := range sizes {
		b.ReportMetric(rates["on"][size]/rates["off"][size], fmt.Sprintf("ratio-on/off@%dk", size/1000))
	}
}

// benchRule commits an active rule whose failure pattern is a lesson
// category, so each effects computation looks evaluations up.
func benchRule(b *testing.B, a *App, agent, id, text, category string) {
	b.Helper()
	data, err := rules.Rule{ID: id, ProposalID: "p-" + strings.TrimPrefix(id, "r-") + "0000", Agents: []string{agent}, Type: rules.Guideline,
		Status: rules.Active, Importance: rules.Normal, Confidence: 0.8, Content: text, ActivatedAt: time.Now().Add(-12 * time.Hour),
		Effect: &rules.EffectSummary{Category: category}}.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	commitRulesRepo(b, a.RulesRepo, "Add "+id, map[string]string{rules.ActiveRulePath(agent, id): string(data)})
}
