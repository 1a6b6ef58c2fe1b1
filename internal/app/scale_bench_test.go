package app

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/testenv"
)

// scaleSizesEnv lists the stored-decision counts BenchmarkScale measures
// at (make bench-scale); the default is the curve docs/thresholds.md and
// the README report.
const scaleSizesEnv = "PRECEPT_BENCH_SCALE"

var scaleDefaultSizes = []int{100_000, 250_000, 500_000, 1_000_000}

// scaleSizes are the sizes PRECEPT_BENCH_SCALE lists, else the default
// curve, scaled down like every benchmark's under PRECEPT_BENCH_SIZES (so
// make bench-smoke runs it to 10,000).
func scaleSizes(b *testing.B) []int {
	v := os.Getenv(scaleSizesEnv)
	if v == "" {
		var out []int
		for _, n := range scaleDefaultSizes {
			out = append(out, testenv.BenchSize(b, n))
		}
		return out
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || len(out) > 0 && n <= out[len(out)-1] {
			b.Fatalf("%s=%q: want increasing positive counts", scaleSizesEnv, v)
		}
		out = append(out, n)
	}
	return out
}

// Variety at scale: the numbers of agents, reviewers and epics a team with
// a few busy pipelines has after months, and the shapes reviewers'
// comments take.
const (
	scaleAgents    = 20
	scaleReviewers = 400
	scaleEpics     = 5000
)

var (
	scalePolite = []string{"Thanks for putting this together. ", "Appreciate the quick turnaround, but ", "I think this is close. ", "Sorry to be picky here: "}
	scaleCoda   = []string{" Happy to pair on it.", " Let me know if that makes sense.", " Otherwise this looks fine.", ""}
)

// scaleDecision is a decision from a team at scale: a quarter approvals
// without a comment, a tenth approvals with praise or context, a tenth
// terse or vague rejections, and the rest clear negatives as one comment
// (with a prefix, a file or a ticket), a polite longer comment, or two
// points in one comment.
func (g *feedbackGen) scaleDecision(id string, at time.Time) precept.Feedback {
	r := g.rng
	d := precept.Decision{
		DecisionID: id, GateID: fmt.Sprintf("HITL-%d", 1+r.Intn(4)), EpicID: fmt.Sprintf("EPIC-%d", r.Intn(scaleEpics)),
		Agent: fmt.Sprintf("agent-%02d", r.Intn(scaleAgents)), ReviewerID: fmt.Sprintf("reviewer-%d", r.Intn(scaleReviewers)), Timestamp: at,
	}
	d.PromptVersion = g.versions[d.Agent]
	negative := func() string { return g.negatives[r.Intn(len(g.negatives))] }
	switch p := r.Float64(); {
	case p < 0.25:
		d.Decision = precept.Approved
	case p < 0.35:
		d.Decision, d.ReviewerComment = precept.Approved, genPraise[1+r.Intn(len(genPraise)-1)]
	case p < 0.45:
		d.Decision, d.ReviewerComment = precept.Rejected, genTerse[1+r.Intn(len(genTerse)-1)]
	case p < 0.65:
		d.Decision = precept.Rejected
		d.ReviewerComment = scalePolite[r.Intn(len(scalePolite))] + negative() + scaleCoda[r.Intn(len(scaleCoda))]
	case p < 0.80:
		d.Decision = precept.Rejected
		d.ReviewerComment = negative() + " Also: " + negative()
	default:
		d.Decision = precept.Rejected
		d.ReviewerComment = genPrefix[r.Intn(len(genPrefix))] + negative() + fmt.Sprintf(" (in %s, PLAT-%d)", genFiles[r.Intn(len(genFiles))], 1000+r.Intn(9000))
	}
	if err := d.Validate(precept.Limits{}, at); err != nil {
		panic(err)
	}
	return precept.NewFeedback(d, "bench", at)
}

// BenchmarkScale builds the store to a million decisions on the embedded
// defaults (make bench-scale; PRECEPT_BENCH_SCALE=100000,250000 for part
// of the curve) and, at each size, prints the curve issue readers ask
// for: ingest + classify through Redis over the last tenth of the
// store (at most 100,000 decisions: 900k to 1M), classification p50/p99, a full
// re-clustering round, a full effects round over 40 active rules,
// BuildPrompt's p99 at 2,000 requests/s (and its ratio to the same
// figure at 10,000 stored, measured first), GetAnalytics' p99, the
// slowest console page's p99, restart to ready, RSS (anonymous and
// total) and disk per decision. It takes about an hour to 1M on 2 cores
// and needs about 10 GB of disk. PRECEPT_BENCH_HEAPPROFILE=prefix writes
// the live heap at each size to prefix@size.
func BenchmarkScale(b *testing.B) {
	sizes := scaleSizes(b)
	redisAddr := testenv.Redis(b)
	rdb := testenv.RedisClient(b, redisAddr)
	dir := scaleDir(b)
	cfg := benchConfig(b, dir, redisAddr)
	for range b.N {
		a, err := New(b.Context(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		stop := runApp(a)
		b.Cleanup(func() { stop() })
		g := newFeedbackGen(b)
		g.scale = true
		scaleSeed(b, a, g)
		stored := min(scaleBaseline, sizes[0])
		fillAndEvaluate(b, a, g, 0, stored)
		settleCPUWithin(b, time.Minute)
		baseBuild := buildPromptP99(b, newScaleClients(a))
		baseSize := stored
		b.Logf("%d stored: BuildPrompt p99 %s at %d requests/s", stored, baseBuild.Round(time.Microsecond), benchRate)
		for _, size := range sizes {
			label := "@" + sizeLabel(size)
			// The last tenth of the store, as the issue's "between 900k
			// and 1M" asks, within the segment since the last size.
			window := max(1, min(100_000, size/10, size-stored))
			fillAndEvaluate(b, a, g, stored, size-window)
			rate := ingestClassifyRate(b, a, rdb, g, fmt.Sprintf("scale%d", size), window)
			stored = size
			p50, p99 := classifyLatency(b, a, g, 300)
			round, err := a.Evaluator.ReclusterAll(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			effects, measured := effectsRound(b, a)
			// PRECEPT_BENCH_CPUPROFILE=prefix profiles the settling and
			// the serving measurements, to see what runs beside them.
			stopProfile := func() {}
			if prefix := os.Getenv("PRECEPT_BENCH_CPUPROFILE"); prefix != "" {
				stopProfile = startCPUProfile(b, prefix+label)
			}
			// Serving is measured once ingest's work is done, as at the
			// baseline, so the ratio compares like with like.
			settleCPUWithin(b, time.Minute)
			clients := newScaleClients(a)
			build, analytics, analyticsFull := buildPromptP99(b, clients), analyticsP99(b, clients), analyticsFullP99(b, clients)
			page, pageName := consolePagesP99(b, a)
			stopProfile()
			// The footprint of the process that has been working, not
			// of one just restarted.
			if prefix := os.Getenv("PRECEPT_BENCH_HEAPPROFILE"); prefix != "" {
				writeHeapProfile(b, prefix+label)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			rss, anon := rssBytes(), procStatus("RssAnon:")
			b.Logf("%d stored: resident file mappings: %s", size, mappedRSS(dir))
			stop()
			// The restart is profiled on its own, prefix@size-restart.
			stopProfile = func() {}
			if prefix := os.Getenv("PRECEPT_BENCH_CPUPROFILE"); prefix != "" {
				stopProfile = startCPUProfile(b, prefix+label+"-restart")
			}
			start := time.Now()
			if a, err = New(b.Context(), cfg, slog.New(slog.DiscardHandler)); err != nil {
				b.Fatal(err)
			}
			if err := a.Ready(context.Background()); err != nil {
				b.Fatal(err)
			}
			restart := time.Since(start)
			stopProfile()
			stop = runApp(a)
			disk := dirBytes(b, dir)
			b.Logf("%d stored: disk by path: %s", size, diskByPath(b, dir))
			vectors, _ := a.Vectors.Count(context.Background())
			ms2 := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(rate, "ingest+classify/s"+label)
			b.ReportMetric(ms2(p50), "classify-p50-ms"+label)
			b.ReportMetric(ms2(p99), "classify-p99-ms"+label)
			b.ReportMetric(round.Took.Seconds(), "round-s"+label)
			b.ReportMetric(effects.Seconds(), "effects-round-s"+label)
			b.ReportMetric(ms2(build), "build-p99-ms"+label)
			b.ReportMetric(float64(build)/float64(baseBuild), "build-p99/10k"+label)
			b.ReportMetric(ms2(analytics), "analytics-p99-ms"+label)
			b.ReportMetric(ms2(analyticsFull), "analytics-full-split-p99-ms"+label)
			b.ReportMetric(ms2(page), "console-p99-ms"+label)
			b.ReportMetric(restart.Seconds(), "restart-s"+label)
			b.ReportMetric(float64(anon)/(1<<20), "rss-anon-MiB"+label)
			b.ReportMetric(float64(rss)/(1<<20), "rss-MiB"+label)
			b.ReportMetric(float64(disk)/float64(size), "disk-B/decision"+label)
			b.Logf("%d stored (%d clustered vectors): ingest+classify %.0f/s over the last %d; classify p50 %s p99 %s; re-clustering round %s over %d groups; effects round %s over %d rules; BuildPrompt p99 %s at %d/s (%.2f× its figure at %d); GetAnalytics p99 %s (split with every bucket's distributions %s); slowest console page p99 %s (%s); restart to ready %s; RSS %d MiB (anonymous %d MiB), Go heap in use %d MiB; disk %.0f B/decision",
				size, vectors, rate, window, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), round.Took.Round(time.Millisecond), round.Groups,
				effects.Round(time.Millisecond), measured, build.Round(time.Microsecond), benchRate, float64(build)/float64(baseBuild), baseSize,
				analytics.Round(10*time.Microsecond), analyticsFull.Round(10*time.Microsecond), page.Round(10*time.Microsecond), pageName,
				restart.Round(time.Millisecond), rss>>20, anon>>20, ms.HeapInuse>>20, float64(disk)/float64(size))
		}
		stop()
	}
}

// scaleDirEnv names a directory BenchmarkScale builds its store in and
// leaves behind, so BenchmarkScaleRestart can measure and profile the
// restart of that store as often as needed without building it again.
const scaleDirEnv = "PRECEPT_BENCH_SCALE_DIR"

// scaleDir is PRECEPT_BENCH_SCALE_DIR, which must be empty or absent,
// else a temporary directory.
func scaleDir(b *testing.B) string {
	dir := os.Getenv(scaleDirEnv)
	if dir == "" {
		return b.TempDir()
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		b.Fatalf("%s=%s is not empty: BenchmarkScale builds its store from nothing", scaleDirEnv, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkScaleRestart restarts the store BenchmarkScale left in
// PRECEPT_BENCH_SCALE_DIR, else one of 10,000 decisions it builds: New
// to Ready, then the footprint of the process just started.
// PRECEPT_BENCH_CPUPROFILE=path profiles the restart.
func BenchmarkScaleRestart(b *testing.B) {
	redisAddr := testenv.Redis(b)
	dir := os.Getenv(scaleDirEnv)
	if dir == "" {
		dir = b.TempDir()
		a, err := New(b.Context(), benchConfig(b, dir, redisAddr), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		stop := runApp(a)
		g := newFeedbackGen(b)
		g.scale = true
		scaleSeed(b, a, g)
		fillAndEvaluate(b, a, g, 0, testenv.BenchSize(b, 10_000))
		stop()
	}
	cfg := benchConfig(b, dir, redisAddr)
	b.ResetTimer()
	for range b.N {
		stopProfile := func() {}
		if path := os.Getenv("PRECEPT_BENCH_CPUPROFILE"); path != "" {
			stopProfile = startCPUProfile(b, path)
		}
		start := time.Now()
		a, err := New(b.Context(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Ready(context.Background()); err != nil {
			b.Fatal(err)
		}
		restart := time.Since(start)
		stopProfile()
		runtime.GC()
		b.ReportMetric(restart.Seconds(), "restart-s")
		b.ReportMetric(float64(procStatus("RssAnon:"))/(1<<20), "rss-anon-MiB")
		b.Logf("restart to ready %s; resident file mappings: %s", restart.Round(time.Millisecond), mappedRSS(dir))
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// runApp runs a's loops until the returned stop, which also closes a;
// calling stop again does nothing.
func runApp(a *App) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return sync.OnceFunc(func() { cancel(); <-done; a.Close() })
}

// mappedRSS is the resident size of this process's mappings of files
// under dir (bbolt's, the index's), from /proc/self/smaps, largest first.
func mappedRSS(dir string) string {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return err.Error()
	}
	sums := map[string]int64{}
	file := ""
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 6 && strings.Contains(f[0], "-"):
			file = ""
			if rel, err := filepath.Rel(dir, f[5]); err == nil && !strings.HasPrefix(rel, "..") {
				file = rel
			}
		case file != "" && len(f) == 3 && f[0] == "Rss:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			sums[file] += kb << 10
		}
	}
	var out []string
	for k, v := range sums {
		out = append(out, fmt.Sprintf("%s %d MiB", k, v>>20))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// startCPUProfile writes a CPU profile to path until the returned stop.
func startCPUProfile(b *testing.B, path string) (stop func()) {
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); out.Close() }
}

// diskByPath is the size of the files under dir summed by their first
// four path elements, largest first, for reading where disk goes.
func diskByPath(b *testing.B, dir string) string {
	sums := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		parts := strings.SplitN(rel, string(filepath.Separator), 5)
		sums[strings.Join(parts[:min(4, len(parts))], "/")] += info.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return sums[keys[i]] > sums[keys[j]] })
	var out []string
	for _, k := range keys[:min(12, len(keys))] {
		out = append(out, fmt.Sprintf("%s %d MiB", k, sums[k]>>20))
	}
	return strings.Join(out, ", ")
}

// dirBytes is the size of the files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
