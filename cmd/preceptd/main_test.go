package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/lib/testenv"
)

const stream = "asdlc:events:hitl_decisions"

// binaries builds preceptd and precept once per test run.
func binaries(t *testing.T) (preceptd, precept string) {
	t.Helper()
	if testing.Short() {
		t.Skip("process-level test: builds and runs preceptd")
	}
	return testenv.PreceptBinaries(t)
}

// daemon is a preceptd child process.
type daemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	addr   string
	logs   *strings.Builder
	logsMu *sync.Mutex
	exited chan struct{}
}

func startDaemon(t testing.TB, bin, configPath, addr string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, "--config", configPath)
	d := &daemon{t: t, cmd: cmd, addr: addr, logs: &strings.Builder{}, logsMu: &sync.Mutex{}, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.logsMu.Lock()
			d.logs.WriteString(sc.Text() + "\n")
			d.logsMu.Unlock()
		}
	}()
	go func() { cmd.Wait(); pw.Close(); close(d.exited) }()
	t.Cleanup(func() { d.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return d
			}
		}
		select {
		case <-d.exited:
			t.Fatalf("preceptd exited at start:\n%s", d.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("preceptd not ready:\n%s", d.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *daemon) output() string {
	d.logsMu.Lock()
	defer d.logsMu.Unlock()
	return d.logs.String()
}

func (d *daemon) kill() {
	if d.cmd.Process != nil {
		d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.exited
	}
}

func (d *daemon) stop(t testing.TB) {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("preceptd did not stop on SIGTERM:\n%s", d.output())
	}
}

var gaugeLine = regexp.MustCompile(`(?m)^precept_feedback_decisions ([0-9.e+]+)$`)

// stored returns how many decisions the daemon's index holds.
func (d *daemon) stored() int {
	m := gaugeLine.FindStringSubmatch(d.metrics())
	if m == nil {
		return 0
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return int(f)
}

// metrics returns the daemon's /metrics page, empty when it does not answer.
func (d *daemon) metrics() string {
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func writeConfig(t testing.TB, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("precept-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func xaddMany(t *testing.T, rdb *redis.Client, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 1000 {
		pipe := rdb.Pipeline()
		for i := start; i < min(n, start+1000); i++ {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{
				"decision_id": fmt.Sprintf("%s-%06d", prefix, i), "gate_id": "HITL-2", "epic_id": fmt.Sprintf("E-%d", i%17),
				"agent": "coding-agent", "decision": "REJECTED", "reviewer_id": fmt.Sprintf("r-%d", i%5),
				"timestamp": "2026-11-20T10:00:00Z", "reviewer_comment": "please cover the error path with tests",
			}})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func gitCount(t testing.TB, repo string) int {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "ls-tree", "-r", "--name-only", "main", "feedback/decisions").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		id := filepath.Base(l)
		if seen[id] {
			t.Fatalf("decision file %s appears twice", id)
		}
		seen[id] = true
	}
	return len(lines)
}

func pending(t *testing.T, rdb *redis.Client) int64 {
	p, err := rdb.XPending(context.Background(), stream, "precept-evaluator").Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

func TestKilledMidBatchLosesNothingAndStoresNothingTwice(t *testing.T) {
	preceptd, _ := binaries(t)
	redisAddr := testenv.Redis(t)
	rdb := testenv.RedisClient(t, redisAddr)
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	cfg := writeConfig(t, dir, fmt.Sprintf(`
listen: %s
data_dir: %s
node: crash-node
redis: {addr: %q, claim_idle: 2s, claim_interval: 500ms}
feedback: {batch_size: 500, batch_wait: 20ms}
`, addr, filepath.Join(dir, "data"), redisAddr))

	d := startDaemon(t, preceptd, cfg, addr)
	const n = 20000
	xaddMany(t, rdb, "crash", n)
	waitFor(t, "ingestion under way", 60*time.Second, func() bool { s := d.stored(); return s >= 2000 }, d.output)
	before := d.stored()
	d.kill()
	if before >= n {
		t.Fatalf("ingestion finished before the kill (%d stored); nothing was mid-batch", before)
	}
	t.Logf("SIGKILL with %d of %d decisions indexed", before, n)

	d = startDaemon(t, preceptd, cfg, addr)
	waitFor(t, "all decisions after restart", 120*time.Second, func() bool { return d.stored() == n && pending(t, rdb) == 0 }, d.output)
	d.stop(t)
	if got := gitCount(t, filepath.Join(dir, "data", "feedback.git")); got != n {
		t.Fatalf("git holds %d decisions, want %d", got, n)
	}
	out, err := exec.Command("git", "-C", filepath.Join(dir, "data", "feedback.git"), "fsck", "--strict", "--no-dangling").CombinedOutput()
	if err != nil {
		t.Fatalf("git fsck after a crash: %v\n%s", err, out)
	}
}

func TestTwoReplicasShareTheGroupAndOneTakesOverWhenTheOtherDies(t *testing.T) {
	preceptd, _ := binaries(t)
	redisAddr := testenv.Redis(t)
	rdb := testenv.RedisClient(t, redisAddr)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var ds []*daemon
	for _, node := range []string{"replica-a", "replica-b"} {
		addr := testenv.FreeAddr(t)
		cfg := writeConfig(t, dir, fmt.Sprintf(`
listen: %s
data_dir: %s
node: %s
redis: {addr: %q, batch_size: 200, claim_idle: 1s, claim_interval: 300ms}
feedback: {batch_size: 200, batch_wait: 10ms, follow_interval: 200ms}
`, addr, data, node, redisAddr))
		ds = append(ds, startDaemon(t, preceptd, cfg, addr))
	}
	const n = 10000
	xaddMany(t, rdb, "rep", n)
	// Let both work, then kill one with entries in flight.
	waitFor(t, "both replicas ingesting", 60*time.Second, func() bool { return ds[0].stored() > 1000 }, ds[0].output)
	ds[1].kill()
	waitFor(t, "the survivor to store everything", 120*time.Second, func() bool {
		return ds[0].stored() == n && pending(t, rdb) <= 0
	}, ds[0].output)

	consumers, err := rdb.XInfoConsumers(context.Background(), stream, "precept-evaluator").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(consumers) != 2 {
		t.Fatalf("consumers = %+v", consumers)
	}
	if got := gitCount(t, filepath.Join(data, "feedback.git")); got != n {
		t.Fatalf("git holds %d decisions, want %d", got, n)
	}
	ds[0].stop(t)
}

func grpcurlPath(t *testing.T) string {
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	root, _ := filepath.Abs("../..")
	p := filepath.Join(root, ".tmp", "bin", "grpcurl")
	if _, err := os.Stat(p); err != nil {
		t.Fatal("grpcurl not found: run `make tools` (make test installs it) or put grpcurl on PATH")
	}
	return p
}

func TestGrpcurlCallsTheRunningServerThroughReflection(t *testing.T) {
	preceptd, _ := binaries(t)
	grpcurl := grpcurlPath(t)
	redisAddr := testenv.Redis(t)
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	cfg := writeConfig(t, dir, fmt.Sprintf("listen: %s\ndata_dir: %s\nredis: {addr: %q}\n", addr, filepath.Join(dir, "data"), redisAddr))
	startDaemon(t, preceptd, cfg, addr)

	run := func(args ...string) string {
		out, err := exec.Command(grpcurl, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := run(addr, "list")
	for _, svc := range []string{"precept.v1.FeedbackService", "precept.v1.RuleService", "precept.v1.PromptService", "grpc.health.v1.Health"} {
		if !strings.Contains(list, svc) {
			t.Fatalf("grpcurl list lacks %s:\n%s", svc, list)
		}
	}
	rec := run("-d", `{"decision":{"decision_id":"grpcurl-1","gate_id":"HITL-2","epic_id":"E","agent":"coding-agent","decision":"VERDICT_REJECTED","reviewer_id":"dana","timestamp":"2026-11-20T10:00:00Z","reviewer_comment":"wrong log level"}}`,
		addr, "precept.v1.FeedbackService/RecordFeedback")
	if !strings.Contains(rec, `"created": true`) {
		t.Fatalf("RecordFeedback via grpcurl:\n%s", rec)
	}
	get := run("-d", `{"decision_id":"grpcurl-1"}`, addr, "precept.v1.FeedbackService/GetFeedback")
	if !strings.Contains(get, "wrong log level") {
		t.Fatalf("GetFeedback via grpcurl:\n%s", get)
	}
	if out := run(addr, "grpc.health.v1.Health/Check"); !strings.Contains(out, "SERVING") {
		t.Fatalf("health via grpcurl:\n%s", out)
	}
}

// The README's worked example: embedded defaults, redis-cli XADD, precept
// feedback get.
func TestReadmeWorkedExampleOnTheEmbeddedDefaults(t *testing.T) {
	preceptd, precept := binaries(t)
	redisCLI, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not found: apt-get install redis-tools (or run .ci/run)")
	}
	dir := t.TempDir()
	addr, redisAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	// Only the ports differ from the defaults, so the test can run beside
	// a developer's `make run`.
	cfg := writeConfig(t, dir, fmt.Sprintf("listen: %s\ndata_dir: %s\nredis: {embedded_addr: %s}\n", addr, filepath.Join(dir, "data"), redisAddr))
	d := startDaemon(t, preceptd, cfg, addr)
	if !strings.Contains(d.output(), "embedded Redis-protocol server started") {
		t.Fatalf("the embedded Redis was not announced:\n%s", d.output())
	}
	host, port, _ := net.SplitHostPort(redisAddr)
	out, err := exec.Command(redisCLI, "-h", host, "-p", port, "XADD", stream, "*",
		"decision_id", "readme-1", "gate_id", "HITL-2", "epic_id", "EPIC-42", "agent", "coding-agent",
		"decision", "REJECTED", "reviewer_id", "alice", "timestamp", "2026-11-20T10:00:00Z",
		"reviewer_comment", "Missing unit tests for the retry path").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli XADD: %v\n%s", err, out)
	}
	var got []byte
	waitFor(t, "precept feedback get", 10*time.Second, func() bool {
		got, err = exec.Command(precept, "--addr", "http://"+addr, "feedback", "get", "readme-1").CombinedOutput()
		return err == nil
	}, d.output)
	if !strings.Contains(string(got), "Missing unit tests for the retry path") || !strings.Contains(string(got), "REJECTED by alice") {
		t.Fatalf("precept feedback get:\n%s", got)
	}
}

func TestRefusesAPublicAddressWithoutTokens(t *testing.T) {
	preceptd, _ := binaries(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf("listen: 0.0.0.0:0\ndata_dir: %s\n", dir))
	out, err := exec.Command(preceptd, "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("preceptd started on 0.0.0.0 without tokens:\n%s", out)
	}
	if !strings.Contains(string(out), "auth.tokens") {
		t.Fatalf("error does not name auth.tokens:\n%s", out)
	}
}
