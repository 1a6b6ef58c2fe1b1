package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/lib/vectorindex/chromem"
)

// feedbackGen makes realistic decisions: comments from the labelled
// fixture, varied the way reviewers vary them (file names, ticket
// numbers, hedges), across agents, reviewers and epics; about 60% clear
// negatives, 25% approvals, 15% terse rejections.
type feedbackGen struct {
	rng       *rand.Rand
	negatives []string
	// versions, when set, gives each agent's decisions a prompt_version
	// (no random draws, so the decisions are otherwise the same).
	versions map[string]string
	// scale draws decisions from a team at scale instead
	// (scaleDecision, BenchmarkScale).
	scale bool
}

func newFeedbackGen(b testing.TB) *feedbackGen {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "feedback", "labelled.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	g := &feedbackGen{rng: rand.New(rand.NewSource(42))}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			Comment string `json:"reviewer_comment"`
			Class   string `json:"expected_class"`
		}
		json.Unmarshal(sc.Bytes(), &m)
		if m.Class != "POSITIVE" && m.Class != "AMBIGUOUS" && len(m.Comment) > 15 {
			g.negatives = append(g.negatives, m.Comment)
		}
	}
	return g
}

var (
	genFiles  = []string{"handler.go", "client.py", "api.ts", "billing/service.go", "README.md", "plan.md", "migrate.sql"}
	genPrefix = []string{"", "", "Again: ", "nit: ", "Blocking: ", "FYI "}
	genSuffix = []string{"", "", " See %s.", " (in %s)", " Same as last sprint.", " Ticket PLAT-%d."}
	genAgents = []string{"coding-agent", "test-agent", "docs-agent", "planner-agent", "review-agent"}
	genPraise = []string{"", "LGTM", "Looks good, thanks!", "Nice work, ship it."}
	genTerse  = []string{"", "no", "redo", "not good", "fix this"}
)

func (g *feedbackGen) decision(id string, at time.Time) precept.Feedback {
	if g.scale {
		return g.scaleDecision(id, at)
	}
	r := g.rng
	d := precept.Decision{
		DecisionID: id, GateID: "HITL-2", EpicID: fmt.Sprintf("EPIC-%d", r.Intn(400)), Agent: genAgents[r.Intn(len(genAgents))],
		ReviewerID: fmt.Sprintf("reviewer-%d", r.Intn(60)), Timestamp: at,
	}
	d.PromptVersion = g.versions[d.Agent]
	switch p := r.Float64(); {
	case p < 0.25:
		d.Decision, d.ReviewerComment = precept.Approved, genPraise[r.Intn(len(genPraise))]
	case p < 0.40:
		d.Decision, d.ReviewerComment = precept.Rejected, genTerse[r.Intn(len(genTerse))]
	default:
		d.Decision = precept.Rejected
		c := genPrefix[r.Intn(len(genPrefix))] + g.negatives[r.Intn(len(g.negatives))]
		if s := genSuffix[r.Intn(len(genSuffix))]; strings.Contains(s, "%s") {
			c += fmt.Sprintf(s, genFiles[r.Intn(len(genFiles))])
		} else if strings.Contains(s, "%d") {
			c += fmt.Sprintf(s, r.Intn(9000)+1000)
		} else {
			c += s
		}
		d.ReviewerComment = c
	}
	if err := d.Validate(precept.Limits{}, at); err != nil {
		panic(err)
	}
	return precept.NewFeedback(d, "bench", at)
}

// fillAndEvaluate stores decisions [from, to) and waits until the
// evaluator has classified all of them. With from >= to (a size the
// previous size's live windows already passed) it stores nothing.
func fillAndEvaluate(b *testing.B, a *App, g *feedbackGen, from, to int) {
	if from >= to {
		return
	}
	ctx := context.Background()
	now := time.Now()
	for start := from; start < to; start += 2000 {
		var batch []precept.Feedback
		for i := start; i < min(to, start+2000); i++ {
			batch = append(batch, g.decision(fmt.Sprintf("bench-%07d", i), now.Add(-time.Duration(i)*time.Second)))
		}
		if _, err := a.Feedback.Store(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	waitEvaluated(b, a, fmt.Sprintf("bench-%07d", to-1), 60*time.Minute)
}

func waitEvaluated(b *testing.B, a *App, id string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		if _, _, err := a.Evaluator.Evaluation(context.Background(), id); err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not evaluated within %s", id, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// classifyLatency measures Evaluate (the classification of one decision
// against everything stored, without storing it) on fresh decisions.
func classifyLatency(b *testing.B, a *App, g *feedbackGen, n int) (p50, p99 time.Duration) {
	var lat []time.Duration
	now := time.Now()
	for i := 0; len(lat) < n; i++ {
		d := g.decision(fmt.Sprintf("probe-%d", i), now).Decision
		if !d.Decision.Negative() || len(d.ReviewerComment) < 20 {
			continue // the clustered path is the expensive one
		}
		start := time.Now()
		if _, err := a.Evaluator.Evaluate(context.Background(), d); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// ingestClassifyRate XADDs n decisions and measures from the first entry
// to the last decision's evaluation.
func ingestClassifyRate(b *testing.B, a *App, rdb *redis.Client, g *feedbackGen, prefix string, n int) float64 {
	ctx := context.Background()
	now := time.Now()
	pipe := rdb.Pipeline()
	for i := range n {
		f := g.decision(fmt.Sprintf("%s-%06d", prefix, i), now)
		data, _ := json.Marshal(f.Decision)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: a.Config.Redis.Stream, Values: map[string]any{"data": string(data)}})
	}
	start := time.Now()
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	waitEvaluated(b, a, fmt.Sprintf("%s-%06d", prefix, n-1), 30*time.Minute)
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkIngestClassify reports, per index backend, the classification
// cost per decision (p50/p99) and end-to-end ingest+classify throughput
// with 10k and 100k decisions stored and evaluated. Run with -benchtime
// 1x; PRECEPT_BENCH_SIZES lists other sizes (testenv.BenchSizes),
// PRECEPT_BENCH_BACKENDS=embedded the backends; PRECEPT_BENCH_ANALYTICS=off
// runs without analytics, to measure what it costs.
func BenchmarkIngestClassify(b *testing.B) {
	sizes := testenv.BenchSizes(b)
	backends := []string{"embedded", "chroma"}
	if b := os.Getenv("PRECEPT_BENCH_BACKENDS"); b != "" {
		backends = strings.Split(b, ",")
	}
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			redisAddr := testenv.Redis(b)
			rdb := testenv.RedisClient(b, redisAddr)
			index := ""
			if backend == "chroma" {
				index = fmt.Sprintf("evaluator: {index: {backend: chroma, chroma: {url: %q, collection_prefix: bench%d}}}", testenv.Chroma(b), time.Now().UnixNano())
			}
			if os.Getenv("PRECEPT_BENCH_ANALYTICS") == "off" {
				index += "\nanalytics: {enabled: false}"
			}
			cfg, err := config.Parse(fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nnode: bench\nredis: {addr: %q}\n%s\n", b.TempDir(), redisAddr, index), nil)
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				a, err := New(b.Context(), cfg, slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				stop := runApp(a)
				g := newFeedbackGen(b)
				stored := 0
				for _, size := range sizes {
					fill := time.Now()
					fillAndEvaluate(b, a, g, stored, size)
					fillRate := float64(max(size-stored, 0)) / time.Since(fill).Seconds()
					stored = max(stored, size)
					p50, p99 := classifyLatency(b, a, g, 300)
					rate := ingestClassifyRate(b, a, rdb, g, fmt.Sprintf("live%d", size), 5000)
					stored += 5000
					label := "@" + sizeLabel(size)
					// A full re-clustering round over everything stored,
					// while nothing else runs.
					round, err := a.Evaluator.ReclusterAll(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(round.Took.Seconds(), "round-s"+label)
					b.ReportMetric(float64(rssBytes())/(1<<20), "rss-MiB"+label)
					if dir := os.Getenv("PRECEPT_BENCH_HEAPDIR"); dir != "" {
						// What holds memory per stored decision:
						// go tool pprof -sample_index=inuse_space.
						writeHeapProfile(b, filepath.Join(dir, "heap-"+backend+label+".pprof"))
					}
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					b.Logf("%s, %d stored: re-clustering round over %d groups (%d clustered decisions) took %s, moved %d; process RSS %d MiB (anonymous %d MiB, file-backed %d MiB), Go heap in use %d MiB",
						backend, stored, round.Groups, round.Members, round.Took.Round(time.Millisecond), round.Moved, rssBytes()>>20,
						procStatus("RssAnon:")>>20, procStatus("RssFile:")>>20, ms.HeapInuse>>20)
					b.ReportMetric(float64(p50.Microseconds())/1000, "classify-p50-ms"+label)
					b.ReportMetric(float64(p99.Microseconds())/1000, "classify-p99-ms"+label)
					b.ReportMetric(rate, "ingest+classify/s"+label)
					vectors, _ := a.Vectors.Count(context.Background())
					if st, ok := a.Vectors.(interface{ Stats() chromem.Stats }); ok {
						s := st.Stats()
						b.Logf("%s, %d stored: %d queries re-scored %.1f rows each from the journal", backend, size, s.Queries, float64(s.Rescored)/float64(max(s.Queries, 1)))
					}
					b.Logf("%s, %d stored (%d clustered vectors): classify p50 %s p99 %s; ingest+classify %.0f decisions/s; prefill evaluated %.0f/s",
						backend, size, vectors, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), rate, fillRate)
				}
				stop()
			}
		})
	}
}

// rssBytes is the process's resident set size (the benchmark process
// runs preceptd's App in it), 0 when /proc is not there.
func rssBytes() int64 { return procStatus("VmRSS:") }

// procStatus reads a size in kB from /proc/self/status, in bytes.
func procStatus(key string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}
