package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept/evaluator"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/prompts"
)

// What BenchmarkScale measures besides ingest, at every size: the serving
// paths a user meets while the store grows (issue "A million decisions on
// one node", Done when).
const (
	// scaleBaseline is the size at which BuildPrompt's latency is first
	// measured; later sizes report their p99 as a ratio to it.
	scaleBaseline = 10_000
	// scaleRulesPerAgent active rules per agent, each on a lesson
	// category, so an effects round has 40 rules to measure against the
	// decisions their prompt versions stamp.
	scaleRulesPerAgent = 2
	// scalePageRequests requests per console route and scaleAnalyticsCalls
	// GetAnalytics calls, one after another, after a few warm-up ones.
	scalePageRequests   = 50
	scaleAnalyticsCalls = 400
)

// scaleRuleCategories are the categories the seeded rules watch.
var scaleRuleCategories = []string{"tests-missing", "errors-ignored"}

// scaleSeed commits the rules BenchmarkScale serves and measures: the
// 20-rule coding-agent prompt BenchmarkPrompt builds, and two active rules
// for each of the generator's agents, whose prompt versions the
// generator then stamps on their decisions (g.versions).
func scaleSeed(b *testing.B, a *App, g *feedbackGen) {
	seedPromptBench(b, a)
	for i := range scaleAgents {
		agent := fmt.Sprintf("agent-%02d", i)
		for j := range scaleRulesPerAgent {
			benchRule(b, a, agent, fmt.Sprintf("r-scale%02d%d", i, j),
				fmt.Sprintf("Rule %d for %s: keep functions short and tested.", j, agent), scaleRuleCategories[j])
		}
	}
	a.Prompts.Notify()
	if _, err := a.Prompts.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	g.versions = map[string]string{}
	for i := range scaleAgents {
		agent := fmt.Sprintf("agent-%02d", i)
		p, err := a.Prompts.Build(context.Background(), prompts.Request{Agent: agent, Stage: "implement", BasePrompt: new("You write Go.")})
		if err != nil || len(p.RuleIDs) != scaleRulesPerAgent {
			b.Fatalf("prompt for %s: %v, rules %v", agent, err, p.RuleIDs)
		}
		g.versions[agent] = p.Version
	}
}

// scaleClients are Connect clients of a running preceptd, as a pipeline
// calls it: HTTP/1.1 keep-alive over loopback.
type scaleClients struct {
	prompts   preceptv1connect.PromptServiceClient
	analytics preceptv1connect.AnalyticsServiceClient
}

func newScaleClients(a *App) scaleClients {
	h1 := new(http.Protocols)
	h1.SetHTTP1(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: h1, MaxIdleConnsPerHost: benchClients * 2}}
	return scaleClients{
		prompts:   preceptv1connect.NewPromptServiceClient(hc, a.URL()),
		analytics: preceptv1connect.NewAnalyticsServiceClient(hc, a.URL()),
	}
}

// scaleBuildSlices is how many slices of benchSlice BuildPrompt's latency
// is measured over: with six, one stall of the background loops set the
// p99 of a whole size (48 ms at 10k stored in the first run to 1M,
// 13 ms at 1M).
const scaleBuildSlices = 25

// buildPromptP99 is BuildPrompt's p99 at benchRate requests per second
// from benchClients clients (BenchmarkPrompt's latency phase), over
// scaleBuildSlices slices.
func buildPromptP99(b *testing.B, c scaleClients) time.Duration {
	msg := &preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/handler.go"}
	build := func(ctx context.Context) error {
		_, err := c.prompts.BuildPrompt(ctx, connect.NewRequest(msg))
		return err
	}
	closedLoop(b, benchClients, time.Second, build) // warm up connections and pools
	var runs []loadResult
	for range scaleBuildSlices {
		runs = append(runs, paced(b, benchClients, benchRate, benchSlice, build))
	}
	return merged(runs).pct(99)
}

// analyticsP99 is GetAnalytics' p99 over calls one after another,
// alternating the console's two usual questions as the console and the
// CLI's text output ask them: the last 30 days in total, and split by
// agent, each bucket without its distributions (totals_only_lists).
// analyticsFullP99 asks the split with every bucket's distributions, the
// heaviest answer the API gives for 30 days (docs/analytics.md, "Cost").
func analyticsP99(b *testing.B, c scaleClients) time.Duration {
	now := time.Now()
	return analyticsLatency(b, c, scaleAnalyticsCalls,
		&preceptv1.GetAnalyticsRequest{From: timestamppb.New(now.AddDate(0, 0, -30)), To: timestamppb.New(now), TotalsOnlyLists: true},
		&preceptv1.GetAnalyticsRequest{From: timestamppb.New(now.AddDate(0, 0, -30)), To: timestamppb.New(now), TotalsOnlyLists: true, Split: preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_AGENT},
	)
}

func analyticsFullP99(b *testing.B, c scaleClients) time.Duration {
	now := time.Now()
	return analyticsLatency(b, c, scaleAnalyticsCalls/4,
		&preceptv1.GetAnalyticsRequest{From: timestamppb.New(now.AddDate(0, 0, -30)), To: timestamppb.New(now), Split: preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_AGENT},
	)
}

// analyticsLatency is the p99 of n calls, taking reqs in turn, after ten
// warm-up calls.
func analyticsLatency(b *testing.B, c scaleClients, n int, reqs ...*preceptv1.GetAnalyticsRequest) time.Duration {
	call := func(i int) time.Duration {
		start := time.Now()
		if _, err := c.analytics.GetAnalytics(context.Background(), connect.NewRequest(reqs[i%len(reqs)])); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := range 10 {
		call(i)
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = call(i)
	}
	slices.Sort(lat)
	return lat[len(lat)*99/100]
}

// consolePagesP99 serves the console pages whose cost can grow with the
// store, scalePageRequests times each, and returns the slowest route's
// p99 with its name.
func consolePagesP99(b *testing.B, a *App) (time.Duration, string) {
	cookie := consoleSession(b, a)
	clusters, _, err := a.Evaluator.Clusters(context.Background(), evaluator.ClusterQuery{})
	if err != nil || len(clusters) == 0 {
		b.Fatalf("no clusters: %v", err)
	}
	largest := slices.MaxFunc(clusters, func(x, y evaluator.ClusterView) int { return x.Stats.Size - y.Stats.Size })
	rule := fmt.Sprintf("r-scale%02d%d", 3, 0)
	routes := []consoleRoute{
		{name: "queue", path: "/ui/queue"},
		{name: "decision", path: "/ui/decisions/bench-0000001"},
		{name: "clusters", path: "/ui/clusters"},
		{name: "clusters of one agent", path: "/ui/clusters?agent=agent-03"},
		{name: "rules active", path: "/ui/rules?status=active"},
		{name: "rule with effect", path: "/ui/rules/" + rule},
		{name: "rule effect svg", path: "/ui/rules/" + rule + "/effect?format=svg"},
		{name: "analytics 30 days", path: "/ui/analytics"},
		{name: "analytics by agent", path: "/ui/analytics?split=agent"},
		{name: "analytics categories svg", path: "/ui/analytics/categories?format=svg"},
		{name: "needs review", path: "/ui/review"},
	}
	routes = append(routes,
		consoleRoute{name: "largest cluster", path: "/ui/clusters/" + url.PathEscape(largest.ID)},
		consoleRoute{name: "largest cluster, last members", path: "/ui/clusters/" + url.PathEscape(largest.ID) + fmt.Sprintf("?members=%d", (largest.Stats.Size-1)/50*50)})
	var worst time.Duration
	var name string
	for _, rt := range routes {
		row := measurePageN(b, a, cookie, rt, 5, scalePageRequests)
		if row.p99 > worst {
			worst, name = row.p99, rt.name
		}
	}
	return worst, name
}

// effectsRound catches the effects tracker up and times one full pass
// over every active rule.
func effectsRound(b *testing.B, a *App) (time.Duration, int) {
	if a.Effects == nil {
		b.Fatal("effects are off in the benchmark's configuration")
	}
	if _, err := a.Effects.CatchUp(context.Background()); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	rep, err := a.Effects.Pass(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start), len(rep.Effects)
}
