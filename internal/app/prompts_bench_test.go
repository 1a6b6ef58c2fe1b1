package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

const (
	benchClients = 50
	// benchPairs short echo/BuildPrompt slices are interleaved, so both
	// see the same background load; the median pair ratio is reported.
	benchPairs = 16
	benchSlice = 400 * time.Millisecond
	// benchRate is the aggregate request rate of the latency phase: well
	// below capacity, so latency shows service time, not queueing.
	benchRate      = 2000
	benchRatePairs = 6
	benchWatchRuns = 30
)

// loadResult is what one phase of load measured.
type loadResult struct {
	calls     int
	rate      float64
	latencies []time.Duration // sorted
}

func (r loadResult) pct(p int) time.Duration { return r.latencies[(len(r.latencies)-1)*p/100] }

func (r loadResult) String() string {
	return fmt.Sprintf("%.0f/s, p50 %s, p99 %s", r.rate, r.pct(50).Round(time.Microsecond), r.pct(99).Round(time.Microsecond))
}

// closedLoop runs call from clients goroutines back to back for d.
func closedLoop(b *testing.B, clients int, d time.Duration, call func(context.Context) error) loadResult {
	return drive(b, clients, d, 0, call)
}

// paced runs call from clients goroutines at an aggregate rate for d.
// Latency counts from when a call was due, so a slow call delays (and
// charges) the next one rather than hiding it.
func paced(b *testing.B, clients int, rate float64, d time.Duration, call func(context.Context) error) loadResult {
	return drive(b, clients, d, time.Duration(float64(clients)/rate*float64(time.Second)), call)
}

func drive(b *testing.B, clients int, d, interval time.Duration, call func(context.Context) error) loadResult {
	ctx := context.Background()
	var wg sync.WaitGroup
	lat := make([][]time.Duration, clients)
	begin := time.Now()
	end := begin.Add(d)
	for i := range clients {
		wg.Go(func() {
			due := begin.Add(interval * time.Duration(i) / time.Duration(clients))
			for {
				if interval > 0 {
					time.Sleep(time.Until(due))
				} else {
					due = time.Now()
				}
				if due.After(end) {
					return
				}
				if err := call(ctx); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(due))
				due = due.Add(interval)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		b.Fatal("no calls completed")
	}
	slices.Sort(all)
	return loadResult{calls: len(all), rate: float64(len(all)) / time.Since(begin).Seconds(), latencies: all}
}

func merged(rs []loadResult) loadResult {
	var out loadResult
	var secs float64
	for _, r := range rs {
		out.calls += r.calls
		out.latencies = append(out.latencies, r.latencies...)
		secs += float64(r.calls) / r.rate
	}
	slices.Sort(out.latencies)
	out.rate = float64(out.calls) / secs
	return out
}

// interleave runs n pairs of phases, alternating which of the two runs
// first, so neither always follows the other; each pair function returns
// (echo, BuildPrompt).
func interleave(n int, echoFirst, buildFirst func(i int) (loadResult, loadResult)) (echoes, builds []loadResult) {
	for i := range n {
		pair := echoFirst
		if i%2 == 1 {
			pair = buildFirst
		}
		e, b := pair(i)
		echoes, builds = append(echoes, e), append(builds, b)
	}
	return echoes, builds
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

// seedPromptBench commits a realistic rules repository: a 2 KB stage
// prompt, _rules.md on three levels and 20 active rules for the agent.
func seedPromptBench(b *testing.B, a *App) {
	files := map[string]string{
		"prompts/implement.md":      strings.Repeat("You are the implementation agent. Follow the task description precisely and keep the diff small.\n", 20),
		"prompts/_rules.md":         strings.Repeat("Name functions for what they do; keep them short.\n", 6),
		"prompts/src/_rules.md":     strings.Repeat("Every package has a doc comment that says what it is for.\n", 6),
		"prompts/src/api/_rules.md": strings.Repeat("Handlers validate input before they touch storage.\n", 6),
	}
	for i := range 20 {
		imp := []rulefmt.Importance{rulefmt.Normal, rulefmt.Important, rulefmt.Critical}[i%3]
		text := fmt.Sprintf("Rule %d: when a retry loop gives up, return the last error wrapped with the attempt count so callers can tell a timeout from a refusal.", i)
		files = mergeFiles(files, activeRule(b, "coding-agent", fmt.Sprintf("r-bench%02d", i), text, imp, 0.5+float64(i)/50))
	}
	commitRulesRepo(b, a.RulesRepo, "benchmark rules", files)
	if _, err := a.Prompts.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPrompt measures BuildPrompt against the Ping echo handler on
// the same server, through the same interceptors, with 50 clients over
// loopback (Connect protocol, HTTP/1.1 keep-alive), a 20-rule prompt and
// _rules.md on three levels:
//
//   - throughput: closed loop, echo and BuildPrompt slices interleaved;
//     the ratio is the median of the pairs' ratios;
//   - latency: the same 50 clients at a fixed aggregate rate below
//     capacity (a saturated closed loop measures only the queue: with 50
//     calls in flight, Little's law makes latency 50 / throughput);
//   - the time from an approval commit on main plus the Notify the rule
//     manager sends to a watcher receiving the new version, and from a push
//     without Notify (found by polling).
//
// It runs on the embedded defaults; run it with -benchtime 1x: each phase
// measures itself.
func BenchmarkPrompt(b *testing.B) {
	cfg, err := config.Parse(fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nnode: bench\nredis: {embedded_addr: \"127.0.0.1:0\"}\n", b.TempDir()), nil)
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(b.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; a.Close() }()
	seedPromptBench(b, a)

	h1 := new(http.Protocols)
	h1.SetHTTP1(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: h1, MaxIdleConnsPerHost: benchClients * 2}}
	ping := preceptv1connect.NewPingServiceClient(hc, a.URL())
	prompts := preceptv1connect.NewPromptServiceClient(hc, a.URL())
	// Messages are shared; requests are not (Connect writes their headers).
	pingMsg := &preceptv1.PingRequest{Message: "ping"}
	buildMsg := &preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/handler.go"}
	first, err := prompts.BuildPrompt(context.Background(), connect.NewRequest(buildMsg))
	if err != nil {
		b.Fatal(err)
	}
	if len(first.Msg.RuleIds) != 20 || len(first.Msg.Sources) != 24 {
		b.Fatalf("the benchmark prompt has %d rules and %d sources", len(first.Msg.RuleIds), len(first.Msg.Sources))
	}
	echo := func(ctx context.Context) error { _, err := ping.Ping(ctx, connect.NewRequest(pingMsg)); return err }
	build := func(ctx context.Context) error {
		_, err := prompts.BuildPrompt(ctx, connect.NewRequest(buildMsg))
		return err
	}

	for range b.N {
		closedLoop(b, benchClients, time.Second, echo) // warm up connections and pools
		closedLoop(b, benchClients, time.Second, build)
		var ratios []float64
		echoes, builds := interleave(benchPairs, func(i int) (loadResult, loadResult) {
			e, b := closedLoop(b, benchClients, benchSlice, echo), closedLoop(b, benchClients, benchSlice, build)
			ratios = append(ratios, b.rate/e.rate)
			return e, b
		}, func(i int) (loadResult, loadResult) {
			b, e := closedLoop(b, benchClients, benchSlice, build), closedLoop(b, benchClients, benchSlice, echo)
			ratios = append(ratios, b.rate/e.rate)
			return e, b
		})
		ratio := median(ratios)
		echoAll, buildAll := merged(echoes), merged(builds)

		pacedPair := func(first, second func(context.Context) error) func(int) (loadResult, loadResult) {
			return func(int) (loadResult, loadResult) {
				return paced(b, benchClients, benchRate, benchSlice, first), paced(b, benchClients, benchRate, benchSlice, second)
			}
		}
		echoes, builds = interleave(benchRatePairs, pacedPair(echo, build), func(i int) (loadResult, loadResult) {
			bl, e := pacedPair(build, echo)(i)
			return e, bl
		})
		echoPaced, buildPaced := merged(echoes), merged(builds)

		soloPair := func(first, second func(context.Context) error) func(int) (loadResult, loadResult) {
			return func(int) (loadResult, loadResult) {
				return closedLoop(b, 1, benchSlice, first), closedLoop(b, 1, benchSlice, second)
			}
		}
		echoes, builds = interleave(4, soloPair(echo, build), func(i int) (loadResult, loadResult) {
			bl, e := soloPair(build, echo)(i)
			return e, bl
		})
		echoSolo, buildSolo := merged(echoes), merged(builds)

		notified := watchLatency(b, a, prompts, true, benchWatchRuns)
		polled := watchLatency(b, a, prompts, false, 8)
		approvals, approveCalls := approvalLatency(b, a, prompts)

		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(echoAll.rate, "echo-req/s")
		b.ReportMetric(buildAll.rate, "build-req/s")
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(ms(buildPaced.pct(50)), "build-p50-ms")
		b.ReportMetric(ms(buildPaced.pct(99)), "build-p99-ms")
		b.ReportMetric(ms(echoPaced.pct(99)), "echo-p99-ms")
		b.ReportMetric(ms(buildSolo.pct(99)), "build-solo-p99-ms")
		b.ReportMetric(ms(notified[len(notified)/2]), "approval-watch-p50-ms")
		b.ReportMetric(ms(notified[len(notified)-1]), "approval-watch-max-ms")
		b.ReportMetric(ms(polled[len(polled)-1]), "push-watch-max-ms")
		b.ReportMetric(ms(approvals[len(approvals)/2]), "rule-approval-watch-p50-ms")
		b.ReportMetric(ms(approvals[len(approvals)-1]), "rule-approval-watch-max-ms")

		b.Logf("%d clients, prompt of %d bytes (20 rules, 3 _rules.md levels), %d CPUs shared by clients and server", benchClients, len(first.Msg.Prompt), runtime.GOMAXPROCS(0))
		b.Logf("throughput, closed loop, %d interleaved pairs of %s: echo %s | BuildPrompt %s", benchPairs, benchSlice, echoAll, buildAll)
		b.Logf("BuildPrompt/echo throughput ratio: median of pairs %.2f (pairs from %.2f to %.2f; totals %.2f) (target >= 0.8)",
			ratio, slices.Min(ratios), slices.Max(ratios), buildAll.rate/echoAll.rate)
		b.Logf("latency at %d req/s from %d clients: echo %s | BuildPrompt %s (target p99 < 2ms)", benchRate, benchClients, echoPaced, buildPaced)
		b.Logf("latency of one client alone: echo %s | BuildPrompt %s", echoSolo, buildSolo)
		b.Logf("approval commit + Notify -> watcher over %d runs: p50 %s, max %s (target < 100ms)",
			len(notified), notified[len(notified)/2].Round(time.Microsecond), notified[len(notified)-1].Round(time.Microsecond))
		b.Logf("rules.Manager second Approve call -> watcher over %d approvals: p50 %s, max %s (target < 100ms); the Approve call alone: p50 %s, max %s",
			len(approvals), approvals[len(approvals)/2].Round(time.Microsecond), approvals[len(approvals)-1].Round(time.Microsecond),
			approveCalls[len(approveCalls)/2].Round(time.Microsecond), approveCalls[len(approveCalls)-1].Round(time.Microsecond))
		b.Logf("push without Notify -> watcher (polling every %s) over %d runs: p50 %s, max %s",
			a.Config.Prompts.WatchPoll, len(polled), polled[len(polled)/2].Round(time.Millisecond), polled[len(polled)-1].Round(time.Millisecond))
	}
}

// benchRuleTexts are distinct enough that reconsolidation treats each as
// a new rule.
var benchRuleTexts = []string{
	"Ask for a rollback plan in every database migration before it is merged.",
	"Return context errors from retry loops instead of logging and continuing.",
	"Name every exported Go function for what it returns, not how it works.",
	"Close HTTP response bodies on every path, including early error returns.",
	"Write table-driven tests for parsers, with one case per malformed input.",
	"Keep Kubernetes resource limits in the chart values, never hard-coded.",
	"Put user-facing error messages in the translation catalogue, not inline.",
	"Pin container base images by digest rather than by a floating tag.",
}

// approvalLatency has the real rule manager approve proposals for a
// second agent (the first has its 20 rules) and measures from the second approval (the one that merges the
// rule into main) to the watcher receiving the prompt with the rule. The
// manager notifies prompts through OnChange, as the wiring does.
func approvalLatency(b *testing.B, a *App, c preceptv1connect.PromptServiceClient) (toWatcher, approveCall []time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := a.Rules
	stream, err := c.WatchPrompt(ctx, connect.NewRequest(&preceptv1.WatchPromptRequest{Agent: "review-agent", Stage: "implement", ScopePath: "src/api/handler.go"}))
	if err != nil {
		b.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		b.Fatal(stream.Err())
	}
	for _, text := range benchRuleTexts {
		p, err := m.Propose(ctx, rules.ManualProposal{Agents: []string{"review-agent"}, Content: text, Rationale: "benchmark"},
			precept.Identity{Name: "carol", Role: precept.RoleApprover})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Approve(ctx, rules.ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := m.Approve(ctx, rules.ApproveRequest{ProposalID: p.ID, By: "bob", Via: rulefmt.ViaAPI}); err != nil {
			b.Fatal(err)
		}
		approveCall = append(approveCall, time.Since(start))
		ruleID := "r-" + strings.TrimPrefix(p.ID, "p-")
		for {
			if !stream.Receive() {
				b.Fatal(stream.Err())
			}
			if slices.Contains(stream.Msg().Prompt.RuleIds, ruleID) || slices.Contains(stream.Msg().Prompt.ShadowRuleIds, ruleID) {
				break
			}
		}
		toWatcher = append(toWatcher, time.Since(start))
	}
	slices.Sort(toWatcher)
	slices.Sort(approveCall)
	return toWatcher, approveCall
}

// watchLatency commits a rule to main and removes it again, runs times,
// and measures from each commit to the watcher receiving the new
// version. With notify, Notify follows each commit as the rule manager
// does; without, the poll has to find it.
func watchLatency(b *testing.B, a *App, c preceptv1connect.PromptServiceClient, notify bool, runs int) []time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.WatchPrompt(ctx, connect.NewRequest(&preceptv1.WatchPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/handler.go"}))
	if err != nil {
		b.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		b.Fatal(stream.Err())
	}
	var out []time.Duration
	for i := range runs {
		change := activeRule(b, "coding-agent", "r-approved", "Ask for a rollback plan on every migration.", rulefmt.Critical, 0.99)
		if i%2 == 1 {
			change = map[string]string{rulefmt.ActiveRulePath("coding-agent", "r-approved"): ""}
		}
		start := time.Now()
		commitRulesRepo(b, a.RulesRepo, "approve or roll back r-approved", change)
		if notify {
			a.Prompts.Notify()
		}
		if !stream.Receive() {
			b.Fatal(stream.Err())
		}
		out = append(out, time.Since(start))
		if has := slices.Contains(stream.Msg().Prompt.RuleIds, "r-approved"); has != (i%2 == 0) {
			b.Fatalf("run %d: the watcher got a prompt with r-approved=%v", i, has)
		}
	}
	slices.Sort(out)
	return out
}
