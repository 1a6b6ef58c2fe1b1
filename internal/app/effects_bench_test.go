package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/internal/testenv"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules"
)

// BenchmarkLearningLoopCost measures what the learning loop costs
// ingestion: ingest+classify on the embedded defaults at 10k and 100k
// stored decisions, with the loop off (effects.enabled and
// analytics.enabled off) and on, in the same run. Both preceptds are
// filled to each size, then measured in alternating windows of 5,000
// decisions (off, on, off, on, off, on) so that a noisy machine's drift
// falls on both; the medians are reported. With the loop on, every agent
// has two active rules with a category pattern, the decisions carry their
// agent's recorded prompt_version, and a full effects round runs before
// the windows. Reported: decisions/s per variant and size, the ratio
// on/off, and how long the round took.
func BenchmarkLearningLoopCost(b *testing.B) {
	sizes := []int{10000, 100000}
	if os.Getenv("PRECEPT_BENCH_SIZES") == "10000" {
		sizes = sizes[:1]
	}
	type instance struct {
		a   *App
		rdb *redis.Client
		g   *feedbackGen
	}
	var inst [2]instance
	for i, variant := range []string{"off", "on"} {
		redisAddr := testenv.Redis(b)
		loop := "effects: {enabled: false}\nanalytics: {enabled: false}"
		if variant == "on" {
			loop = "effects: {enabled: true}\nanalytics: {enabled: true}"
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
		b.Cleanup(func() {
			cancel()
			<-done
			a.Close()
		})
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
		inst[i] = instance{a: a, rdb: testenv.RedisClient(b, redisAddr), g: g}
	}
	stored := 0
	for _, size := range sizes {
		for _, in := range inst {
			fillAndEvaluate(b, in.a, in.g, stored, size)
		}
		if on := inst[1].a; on.Effects != nil {
			if _, err := on.Effects.CatchUp(context.Background()); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			rep, err := on.Effects.Round(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(time.Since(start).Seconds(), fmt.Sprintf("effects-round-s@%dk", size/1000))
			b.Logf("effects round at %d stored: %d rules in %s", size, len(rep.Effects), time.Since(start).Round(time.Millisecond))
		}
		var rates [2][]float64
		for w := range 3 {
			for i, in := range inst {
				rate := ingestClassifyRate(b, in.a, in.rdb, in.g, fmt.Sprintf("live%d-%d-%d", i, size, w), 5000)
				rates[i] = append(rates[i], rate)
			}
		}
		stored = size + 15000
		off, on := median(rates[0]), median(rates[1])
		b.ReportMetric(off, fmt.Sprintf("ingest+classify/s-off@%dk", size/1000))
		b.ReportMetric(on, fmt.Sprintf("ingest+classify/s-on@%dk", size/1000))
		b.ReportMetric(on/off, fmt.Sprintf("ratio-on/off@%dk", size/1000))
		b.Logf("%d stored: ingest+classify off %.0f/s %v, on %.0f/s %v (medians of alternating windows); ratio %.3f", size, off, round0(rates[0]), on, round0(rates[1]), on/off)
	}
}

func round0(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
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
