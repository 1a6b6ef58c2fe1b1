package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// BenchmarkLearningLoopCost measures what the learning loop costs
// ingestion: ingest+classify on the embedded defaults at 10k and 100k
// stored decisions (testenv.BenchSizes), with the loop off
// (effects.enabled and analytics.enabled off) and on, in the same run,
// each variant in a process of its own that inherits the environment,
// PRECEPT_BENCH_SIZES with it. One preceptd at a time
// runs — a twin's background work (re-clustering passes, previews) would
// otherwise land in the other's measurements — filled to each size and
// measured in three windows of 5,000 decisions; the medians are reported.
// With the loop on, every agent has two active rules with a category
// pattern, the decisions carry their agent's recorded prompt_version, and
// a full effects pass runs before the windows. Reported: decisions/s per
// variant and size, the ratio on/off, and how long the pass took.
func BenchmarkLearningLoopCost(b *testing.B) {
	sizes := testenv.BenchSizes(b)
	variant := os.Getenv("PRECEPT_BENCH_LOOP")
	if variant == "" {
		loopCostInSubprocesses(b, sizes)
		return
	}
	loopCostVariant(b, variant, sizes)
}

// loopCostVariant measures one variant, "off" or "on", in this process.
func loopCostVariant(b *testing.B, variant string, sizes []int) {
	redisAddr := testenv.Redis(b)
	rdb := testenv.RedisClient(b, redisAddr)
	loop := "effects: {enabled: false}\nanalytics: {enabled: false}"
	if variant == "on" {
		loop = "effects: {enabled: true}\nanalytics: {enabled: true}"
	}
	cfg, err := config.Parse(fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nnode: bench\nredis: {addr: %q}\n%s\n", b.TempDir(), redisAddr, loop), nil)
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
		if a.Effects != nil {
			took, rules := effectsRound(b, a)
			b.ReportMetric(took.Seconds(), "effects-pass-s@"+sizeLabel(size))
			b.Logf("effects pass at %d stored: %d rules in %s", size, rules, took.Round(time.Millisecond))
		}
		var rates []float64
		for w := range 3 {
			rates = append(rates, ingestClassifyRate(b, a, rdb, g, fmt.Sprintf("live%s%d-%d", variant, size, w), 5000))
		}
		stored = max(stored, size) + 15000
		b.ReportMetric(median(rates), fmt.Sprintf("ingest+classify/s-%s@%s", variant, sizeLabel(size)))
		b.Logf("learning loop %s, %d stored: ingest+classify %.0f/s, windows %v", variant, size, median(rates), round0(rates))
	}
	cancel()
	<-done
	a.Close()
}

// loopCostInSubprocesses runs each variant of BenchmarkLearningLoopCost in
// a process of its own — a second preceptd in the same process inherits
// the first one's heap and soft memory limit, which slowed whichever ran
// second by a third at 100k — and reports both, with the ratio.
func loopCostInSubprocesses(b *testing.B, sizes []int) {
	got := map[string]float64{}
	for _, variant := range []string{"off", "on"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkLearningLoopCost$", "-test.benchtime=1x", "-test.timeout=60m")
		cmd.Env = append(os.Environ(), "PRECEPT_BENCH_LOOP="+variant)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("variant %s: %v\n%s", variant, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "stored") || strings.Contains(line, "effects pass") {
				b.Log(strings.TrimSpace(line))
			}
			f := strings.Fields(line)
			for i := 1; i < len(f); i++ {
				if v, err := strconv.ParseFloat(f[i-1], 64); err == nil && (strings.HasPrefix(f[i], "ingest+classify/s-") || strings.HasPrefix(f[i], "effects-pass-s@")) {
					got[f[i]] = v
					b.ReportMetric(v, f[i])
				}
			}
		}
	}
	for _, size := range sizes {
		k := "@" + sizeLabel(size)
		if off, on := got["ingest+classify/s-off"+k], got["ingest+classify/s-on"+k]; off > 0 && on > 0 {
			b.ReportMetric(on/off, "ratio-on/off"+k)
		} else {
			b.Errorf("no figures at %s: %v", k, got)
		}
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
	data, err := rulefmt.Rule{ID: id, ProposalID: "p-" + strings.TrimPrefix(id, "r-") + "0000", Agents: []string{agent}, Type: rulefmt.Guideline,
		Status: rulefmt.Active, Importance: rulefmt.Normal, Confidence: 0.8, Content: text, ActivatedAt: time.Now().Add(-12 * time.Hour),
		Effect: &rulefmt.EffectSummary{Category: category}}.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	commitRulesRepo(b, a.RulesRepo, "Add "+id, map[string]string{rulefmt.ActiveRulePath(agent, id): string(data)})
}
