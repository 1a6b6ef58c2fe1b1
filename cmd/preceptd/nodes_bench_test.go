package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/testenv"
)

// BenchmarkNodes measures preceptd on one node and on three against one
// git server (git http-backend) and one Redis, all on this machine
// (docs/decisions/0019-evaluation-across-nodes.md):
//
//   - ingest: n decisions sent at once, evaluation off, the time until the
//     last stream entry is acknowledged, which happens only once its
//     decision is on the server; one node and three, as a ratio;
//   - ingest + classify: the same with evaluation on, until every node
//     has evaluated every decision;
//   - the CPU each phase cost (preceptd processes, and the whole
//     machine's busy share), and how many feedback pushes the server
//     refused because another node pushed first;
//   - approval to prompt: a rule approved on one node, until all three
//     serve it in BuildPrompt, on the rules settings of docs/deploy.md.
//
// Each phase has its own repositories on the server and its own stream.
func BenchmarkNodes(b *testing.B) {
	preceptd, _ := testenv.PreceptBinaries(b)
	n := testenv.BenchSize(b, 20000)
	env := &benchEnv{b: b, bin: preceptd, srv: testenv.StartGitServer(b), dir: b.TempDir(), gen: newDecisionGen(b)}
	env.redisAddr = testenv.Redis(b)
	env.rdb = testenv.RedisClient(b, env.redisAddr)
	for range b.N {
		var res = map[string]phaseResult{}
		for _, p := range []struct {
			nodes    int
			evaluate bool
		}{{1, false}, {3, false}, {1, true}, {3, true}} {
			name := fmt.Sprintf("ingest-%d", p.nodes)
			if p.evaluate {
				name = fmt.Sprintf("classify-%d", p.nodes)
			}
			if only := os.Getenv("PRECEPT_BENCH_NODES_PHASE"); only != "" && only != name {
				continue
			}
			r := env.phase(name, p.nodes, p.evaluate, n)
			res[name] = r
			b.Logf("%s: %d decisions on the server in %.2f s (%.0f/s), every node evaluated them after %.2f s (%.0f/s); preceptd CPU %.2f s (%.2f ms a decision), machine busy %.0f%% of %d cores; feedback pushes %v ok, %v refused (another node first)",
				name, n, r.stored.Seconds(), float64(n)/r.stored.Seconds(), r.evaluated.Seconds(), float64(n)/r.evaluated.Seconds(),
				r.cpu, 1000*r.cpu/float64(n), 100*r.busy, r.cores, r.pushesOK, r.pushesRefused)
			if name == "classify-3" {
				lat := r.approvals
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "approval-to-prompt-p50-ms")
				b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "approval-to-prompt-max-ms")
				after := r.afterReturn
				slices.Sort(after)
				b.ReportMetric(float64(after[len(after)/2].Milliseconds()), "approved-to-prompt-p50-ms")
				b.ReportMetric(float64(after[len(after)-1].Milliseconds()), "approved-to-prompt-max-ms")
				b.ReportMetric(float64(r.differing), "clusters-differing")
				if r.differing == 0 {
					b.Logf("the three nodes listed the same clusters (ids, classes, categories, proposals) %s after the last decision was evaluated", r.agreed.Round(time.Millisecond))
				} else {
					b.Logf("the three nodes still listed different clusters %s after the last decision was evaluated: %d lines differ", r.agreed.Round(time.Millisecond), r.differing)
				}
				b.Logf("approval to prompt on all three nodes, %d approvals: p50 %s, max %s (each from the ApproveRule call on one node to the last node serving the rule)",
					len(lat), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
				b.Logf("from ApproveRule's return to the last node serving the rule: p50 %s, max %s", after[len(after)/2].Round(time.Millisecond), after[len(after)-1].Round(time.Millisecond))
			}
		}
		if len(res) < 4 {
			continue // one phase (PRECEPT_BENCH_NODES_PHASE): no ratios
		}
		rate := func(name string) float64 { return float64(n) / res[name].stored.Seconds() }
		evalRate := func(name string) float64 { return float64(n) / res[name].evaluated.Seconds() }
		b.ReportMetric(rate("ingest-1"), "ingest-1node/s")
		b.ReportMetric(rate("ingest-3"), "ingest-3nodes/s")
		b.ReportMetric(rate("ingest-3")/rate("ingest-1"), "ingest-ratio")
		b.ReportMetric(evalRate("classify-1"), "classify-1node/s")
		b.ReportMetric(evalRate("classify-3"), "classify-3nodes/s")
		b.ReportMetric(evalRate("classify-3")/evalRate("classify-1"), "classify-ratio")
		b.ReportMetric(res["classify-3"].cpu/res["classify-1"].cpu, "classify-cpu-ratio")
	}
}

type benchEnv struct {
	b         *testing.B
	bin       string
	srv       *testenv.GitServer
	redisAddr string
	rdb       *redis.Client
	dir       string
	gen       *decisionGen
}

type phaseResult struct {
	stored, evaluated       time.Duration
	cpu                     float64 // CPU seconds of the preceptd processes
	busy                    float64 // share of the machine's CPU time not idle
	cores                   int
	pushesOK, pushesRefused float64
	approvals               []time.Duration
	// afterReturn is, for each approval, from ApproveRule's return on
	// one node to the last node serving the rule.
	afterReturn []time.Duration
	agreed      time.Duration // until every node listed the same clusters
	differing   int           // cluster lines node 0 and another listed differently
}

// phase starts nodes preceptd processes on repositories and a stream of
// their own, sends n decisions and measures them through.
func (e *benchEnv) phase(name string, nodes int, evaluate bool, n int) phaseResult {
	b := e.b
	for _, repo := range []string{"feedback", "rules"} {
		testenv.Git(b, e.srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", e.srv.Dir(repo+"-"+name))
	}
	streamName := "precept:bench:" + name
	var ds []*daemon
	for i := range nodes {
		addr := testenv.FreeAddr(b)
		cfg := writeConfig(b, e.dir, fmt.Sprintf(`
listen: %s
data_dir: %s
node: node-%d
auth:
  tokens:
    - {name: alice, role: approver, token: %s}
    - {name: carol, role: approver, token: %s}
redis: {addr: %s, stream: %q}
feedback:
  git: {remote_url: %q}
evaluator: {enabled: %v}
rules:
  required_approvals: 1
  git: {remote_url: %q, fetch_interval: 10s, write_through: true, signing_key: %q}
`, addr, filepath.Join(e.dir, name, strconv.Itoa(i)), i, aliceTok, carolTok, e.redisAddr, streamName,
			e.srv.URL("feedback-"+name), evaluate, e.srv.URL("rules-"+name), "one deployment's signing key, shared by its three nodes"))
		ds = append(ds, startDaemon(b, e.bin, cfg, addr))
	}
	logs := func() string {
		var sb strings.Builder
		for i, d := range ds {
			out := d.output()
			fmt.Fprintf(&sb, "--- node %d (last 3000 bytes):\n%s\n", i, out[max(0, len(out)-3000):])
		}
		return sb.String()
	}
	events := e.gen.events(name, n)
	cpu0 := processCPU(ds)
	busy0, total0 := machineCPU(b)
	start := time.Now()
	ctx := context.Background()
	for lo := 0; lo < n; lo += 1000 {
		pipe := e.rdb.Pipeline()
		for _, ev := range events[lo:min(n, lo+1000)] {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: streamName, Values: ev})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var r phaseResult
	waitFor(b, name+": every entry acknowledged", 30*time.Minute, func() bool {
		gs, err := e.rdb.XInfoGroups(ctx, streamName).Result()
		return err == nil && len(gs) == 1 && gs[0].EntriesRead == int64(n) && gs[0].Pending == 0
	}, logs)
	r.stored = time.Since(start)
	waitFor(b, name+": every node's index and evaluator", 30*time.Minute, func() bool {
		for _, d := range ds {
			if d.stored() != n || (evaluate && evaluations(d) != n) {
				return false
			}
		}
		return true
	}, logs)
	r.evaluated = time.Since(start)
	r.cpu = processCPU(ds) - cpu0
	busy1, total1 := machineCPU(b)
	r.busy, r.cores = (busy1-busy0)/(total1-total0), runtime.NumCPU()
	b.StopTimer()
	if got := gitCount(b, e.srv.Dir("feedback-"+name)); got != n {
		b.Fatalf("%s: the server holds %d decisions, want %d", name, got, n)
	}
	for _, d := range ds {
		r.pushesOK += metricValue(d, `precept_git_pushes_total{repo="feedback",result="ok"}`)
		r.pushesRefused += metricValue(d, `precept_git_pushes_total{repo="feedback",result="rejected"}`)
	}
	if nodes == 3 && evaluate {
		r.agreed, r.differing = sameClusters(b, ds)
		// A smoke run (make bench-smoke) approves one rule per node.
		approvals := len(benchRules)
		if n < 20000 {
			approvals = len(ds)
		}
		r.approvals, r.afterReturn = e.approvalsToPrompt(name, ds, logs, approvals)
	}
	for _, d := range ds {
		d.stop(b)
	}
	b.StartTimer()
	return r
}

// sameClusters waits, up to a little longer than the evaluator's
// periodic re-clustering interval, until every node lists the same
// clusters — ids, classes, categories and proposals — and returns how
// long that took and, when they never agreed, how many clusters the
// nodes listed differently (the most between node 0 and another), with
// the first difference logged. Evaluation on every node is to give the
// same clusters (docs/decisions/0019-evaluation-across-nodes.md); the
// benchmark reports how far that holds rather than stopping at it.
func sameClusters(b *testing.B, ds []*daemon) (took time.Duration, differing int) {
	start := time.Now()
	var last []string
	for time.Since(start) < 75*time.Second {
		last = last[:0]
		for _, d := range ds {
			last = append(last, clusterPrint(b, d))
		}
		if len(slices.Compact(slices.Clone(last))) == 1 {
			return time.Since(start), 0
		}
		time.Sleep(500 * time.Millisecond)
	}
	first := strings.Split(last[0], "\n")
	for i := 1; i < len(last); i++ {
		other := strings.Split(last[i], "\n")
		only := map[string]int{}
		for _, l := range first {
			only[l]++
		}
		for _, l := range other {
			only[l]--
		}
		diff := 0
		for _, c := range only {
			diff += max(c, -c)
		}
		if diff > differing {
			differing = diff
			var lines []string
			for _, l := range first {
				if only[l] > 0 {
					lines = append(lines, "node 0:        "+l)
				}
			}
			for _, l := range other {
				if only[l] < 0 {
					lines = append(lines, fmt.Sprintf("node %d:        %s", i, l))
				}
			}
			b.Logf("node 0 and node %d list %d and %d clusters, %d lines differ:\n%s", i, len(first), len(other), diff, strings.Join(lines[:min(len(lines), 12)], "\n"))
		}
	}
	return time.Since(start), differing
}

// clusterPrint lists the daemon's clusters of two or more, one line each
// (ListClusters lists no members).
func clusterPrint(b *testing.B, d *daemon) string {
	c := preceptv1connect.NewEvaluatorServiceClient(&http.Client{Transport: tokenTransport{carolTok}}, "http://"+d.addr)
	var lines []string
	for token := ""; ; {
		resp, err := c.ListClusters(context.Background(), connect.NewRequest(&preceptv1.ListClustersRequest{PageSize: 1000, PageToken: token}))
		if err != nil {
			b.Fatal(err)
		}
		for _, cl := range resp.Msg.GetClusters() {
			lines = append(lines, fmt.Sprintf("%s %s %s/%s size %d %s", cl.GetId(), cl.GetClassification(), cl.GetAgent(), cl.GetCategory(), cl.GetStats().GetSize(), cl.GetProposalId()))
		}
		if token = resp.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// benchRules are rules on unrelated subjects, so that no guard holds one
// as a duplicate of another.
var benchRules = []string{
	"Log every retried request with its attempt number and the error that caused it.",
	"Write a unit test for every retry path, including the give-up case.",
	"Close every file and network handle you open on every return path.",
	"Document every exported function with one sentence on what it returns.",
	"Validate request bodies in the handler before any database call.",
	"Ship a down migration with every schema migration and test both.",
	"Pin every third-party dependency to an exact version in the lock file.",
	"Wrap returned errors with the operation and the input that failed.",
}

// approvalsToPrompt approves count rules one after another, each proposed and
// approved on the next node, and returns for each the time from the
// ApproveRule call to the last node serving the rule.
func (e *benchEnv) approvalsToPrompt(name string, ds []*daemon, logs func() string, count int) (lat, afterReturn []time.Duration) {
	b := e.b
	clone := filepath.Join(e.dir, name+"-curator")
	testenv.Git(b, e.dir, "clone", "--quiet", e.srv.URL("rules-"+name), clone)
	if err := os.MkdirAll(filepath.Join(clone, "prompts"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "prompts", "implement.md"), []byte("You implement tasks.\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	testenv.GitAs(b, clone, "Jane Curator", "jane@example.com", "add", ".")
	testenv.GitAs(b, clone, "Jane Curator", "jane@example.com", "commit", "--quiet", "-m", "stage prompt")
	// The nodes may commit to main meanwhile (a held draft, effects):
	// the curator rebases onto theirs and pushes again.
	for attempt := 1; ; attempt++ {
		cmd := exec.Command("git", "-C", clone, "push", "--quiet", "origin", "main")
		out, err := cmd.CombinedOutput()
		if err == nil {
			break
		}
		if attempt == 5 {
			b.Fatalf("the curator's push: %v\n%s", err, out)
		}
		testenv.GitAs(b, clone, "Jane Curator", "jane@example.com", "pull", "--quiet", "--rebase", "origin", "main")
	}
	ctx := context.Background()
	build := func(d *daemon, agent string) (string, error) {
		resp, err := promptsAs(d.addr, carolTok).BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: agent, Stage: "implement"}))
		if err != nil {
			return "", err
		}
		return resp.Msg.GetPrompt() + "\x00" + resp.Msg.GetVersion(), nil
	}
	for _, d := range ds {
		waitFor(b, "the stage prompt on every node", 60*time.Second, func() bool {
			_, err := build(d, "agent-0")
			return err == nil
		}, logs)
	}
	for i, text := range benchRules[:count] {
		d, agent := ds[i%len(ds)], fmt.Sprintf("agent-%d", i%3)
		resp, err := rulesAs(d.addr, carolTok).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
			AffectedAgents: []string{agent}, RuleContent: text, Rationale: "Reviewers keep asking for it.",
		}))
		if err != nil {
			b.Fatalf("propose %q: %v", text, err)
		}
		start := time.Now()
		if _, err := rulesAs(d.addr, aliceTok).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: resp.Msg.GetProposal().GetProposalId()})); err != nil {
			b.Fatal(err)
		}
		approved := time.Since(start)
		versions := map[*daemon]string{}
		var served []string
		for len(versions) < len(ds) {
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("2 minutes after approving %q, %d of %d nodes serve it\n%s", text, len(versions), len(ds), logs())
			}
			for _, d := range ds {
				if _, ok := versions[d]; ok {
					continue
				}
				if got, err := build(d, agent); err == nil && strings.Contains(got, text[:30]) {
					versions[d] = got[strings.IndexByte(got, 0)+1:]
					served = append(served, fmt.Sprintf("node %d %s", slices.Index(ds, d), time.Since(start).Round(time.Millisecond)))
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
		afterReturn = append(afterReturn, time.Since(start)-approved)
		b.Logf("approved on node %d: ApproveRule returned after %s; served by %s", i%len(ds), approved.Round(time.Millisecond), strings.Join(served, ", "))
		if vs := slices.Compact(slices.Sorted(maps.Values(versions))); len(vs) != 1 {
			b.Fatalf("after approving %q the nodes serve versions %v", text, vs)
		}
	}
	return lat, afterReturn
}

// processCPU returns the CPU seconds (user and system) the daemons'
// processes and their finished children (git) have used so far, from
// /proc.
func processCPU(ds []*daemon) float64 {
	var ticks float64
	for _, d := range ds {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
		if err != nil {
			continue
		}
		// The fields after the command name, which ends at the last ')'.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		// utime, stime, and cutime and cstime: the git processes each
		// node ran and waited for.
		for _, k := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseFloat(f[k], 64)
			ticks += v
		}
	}
	return ticks / 100 // USER_HZ
}

// machineCPU returns the machine's busy and total CPU time so far, in
// ticks, from /proc/stat.
func machineCPU(b testing.TB) (busy, total float64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])[1:]
	for i, s := range f {
		v, _ := strconv.ParseFloat(s, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// evaluations returns how many decisions the daemon has evaluated.
func evaluations(d *daemon) int {
	var sum float64
	for _, class := range []string{"POSITIVE", "AMBIGUOUS", "EDGE_CASE", "GENERALIZABLE_LOW", "GENERALIZABLE_HIGH"} {
		sum += metricValue(d, `precept_evaluations_total{class="`+class+`"}`)
	}
	return int(sum)
}

// metricValue returns one sample of the daemon's /metrics, 0 when absent.
func metricValue(d *daemon, series string) float64 {
	body := d.metrics()
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// decisionGen draws decisions from the labelled comments of
// testdata/feedback: rejections with varied comments, approvals without,
// over 3 agents, 40 reviewers and 200 epics.
type decisionGen struct {
	rng      *rand.Rand
	comments []string
}

func newDecisionGen(b testing.TB) *decisionGen {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "feedback", "labelled.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	g := &decisionGen{rng: rand.New(rand.NewSource(7))}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			Comment string `json:"reviewer_comment"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && len(m.Comment) > 15 {
			g.comments = append(g.comments, m.Comment)
		}
	}
	if len(g.comments) == 0 {
		b.Fatal("no comments in testdata/feedback/labelled.jsonl")
	}
	return g
}

func (g *decisionGen) events(prefix string, n int) []map[string]any {
	out := make([]map[string]any, n)
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	for i := range out {
		ev := map[string]any{
			"decision_id": fmt.Sprintf("%s-%07d", prefix, i), "gate_id": fmt.Sprintf("HITL-%d", 1+g.rng.Intn(4)),
			"epic_id": fmt.Sprintf("E-%d", g.rng.Intn(200)), "agent": fmt.Sprintf("agent-%d", g.rng.Intn(3)),
			"reviewer_id": fmt.Sprintf("r-%d", g.rng.Intn(40)), "timestamp": at.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
			"decision": "APPROVED",
		}
		if g.rng.Intn(3) > 0 {
			ev["decision"], ev["reviewer_comment"] = "REJECTED", g.comments[g.rng.Intn(len(g.comments))]
		}
		out[i] = ev
	}
	return out
}
