// Package examples holds the client examples of docs/clients.md, one
// folder per language. This test runs each of them against a real
// preceptd and a real Redis.
package examples

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/testenv"
)

// The request every example makes (their defaults).
const (
	agent = "coding-agent"
	stage = "implement"
	path  = "services/billing/api.go"
)

// Tokens of the test's preceptd: the examples read as a reader; the rule
// is proposed by one approver and approved by two others.
const (
	readerToken = "pipeline-reader-0001"
	aliceToken  = "alice-approver-00001"
	bobToken    = "bob-approver-000001"
	carolToken  = "carol-approver-0001"
)

// python is Debian's, which sees Debian's python3-redis; the PATH's
// python3 may be another one.
const python = "/usr/bin/python3"

// example is how to run one language's example, from the module root.
// Those with byEnv are given the address, token and Redis in PRECEPT_
// variables instead of flags, as the README runs the Go one.
type example struct {
	name  string
	argv  []string
	byEnv bool
}

var examples = []example{
	{"typescript", []string{"node", "examples/typescript/main.mjs"}, false},
	{"python", []string{python, "examples/python/example.py"}, true},
	{"go", []string{"go", "run", "./examples/go"}, true},
}

// TestExamplesProduceDecisionsAndPrintThePromptTheAPIBuilds runs the
// TypeScript (after tsc), Python and Go examples against a preceptd that
// has a _rules.md and an approved rule on main. Each must print the
// prompt and the explanation the API returns for the same request, and
// its decisions must be stored carrying the version of that prompt.
func TestExamplesProduceDecisionsAndPrintThePromptTheAPIBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test: runs preceptd, node, python and go")
	}
	started := time.Now()
	root := moduleRoot(t)
	requireTools(t, root)
	buildTypeScript(t, root)

	redisAddr := testenv.Redis(t)
	d := startPreceptd(t, root, redisAddr)
	addRules(t, d)

	prompts := preceptv1connect.NewPromptServiceClient(http.DefaultClient, d.url, connect.WithInterceptors(bearer(readerToken)))
	feedback := preceptv1connect.NewFeedbackServiceClient(http.DefaultClient, d.url, connect.WithInterceptors(bearer(readerToken)))
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			ctx := context.Background()
			built, why := promptOf(t, prompts)
			prefix := fmt.Sprintf("example-%s-%d", ex.name, time.Now().UnixNano())
			out := runExample(t, root, ex, d.url, readerToken, redisAddr, "--id-prefix", prefix)

			head, sent, _ := strings.Cut(out, "\ndecision ")
			if want := expectedOutput(built, why); head+"\n" != want {
				t.Fatalf("%s printed\n%s\nwant what the API returns:\n%s", ex.name, head, want)
			}
			entries := sentEntries(t, "decision "+sent, prefix, built.Version)
			for id, entry := range entries {
				fb := stored(t, ctx, feedback, id, d)
				if got := fb.GetDecision().GetPromptVersion(); got != built.Version {
					t.Errorf("%s stored with prompt version %q, want %q", id, got, built.Version)
				}
				if fb.GetSource() != "stream:"+entry {
					t.Errorf("%s stored from %q, want stream:%s", id, fb.GetSource(), entry)
				}
				dec := fb.GetDecision()
				if dec.GetAgent() != agent || dec.GetScopePath() != path || time.Since(dec.GetTimestamp().AsTime()) > time.Minute {
					t.Errorf("%s stored as %v", id, dec)
				}
				// The rejection carries a list and a number, which the
				// stream's flat encoding writes as JSON and in decimal.
				if strings.HasSuffix(id, "-1") && (strings.Join(dec.GetTags(), ",") != "money" || dec.GetReviewDurationSeconds() != 240 || dec.GetReviewerComment() == "") {
					t.Errorf("%s stored as %v: want tags [money], 240 s of review and a comment", id, dec)
				}
			}
			// The version the decisions carry is one preceptd recorded
			// as served, with the rule in it (docs/effects.md).
			v, err := prompts.GetPromptVersion(ctx, connect.NewRequest(&preceptv1.GetPromptVersionRequest{Version: built.Version}))
			if err != nil || strings.Join(v.Msg.GetVersion().GetRuleIds(), ",") != strings.Join(built.RuleIds, ",") {
				t.Errorf("GetPromptVersion(%s) = %v, %v; want rules %v", built.Version, v, err, built.RuleIds)
			}

			// A token preceptd does not know is refused, and the example
			// says so in one line with the Connect code.
			out, err = tryExample(root, ex, d.url, "not-a-known-token", redisAddr)
			out = strings.TrimSuffix(strings.TrimSpace(out), "\nexit status 1") // go run's own line
			if err == nil || !strings.Contains(out, "unauthenticated") || strings.Contains(out, "\n") {
				t.Errorf("%s with an unknown token: %v, printed\n%s\nwant one line naming unauthenticated", ex.name, err, out)
			}
			// A Redis that is not there fails the example at once, in one
			// line, rather than queueing or retrying.
			start := time.Now()
			out, err = tryExample(root, ex, d.url, readerToken, testenv.FreeAddr(t))
			out = strings.TrimSuffix(strings.TrimSpace(out), "\nexit status 1")
			last := out[strings.LastIndex(out, "\n")+1:]
			if err == nil || !strings.HasPrefix(last, "precept example: ") || !strings.Contains(last, "add decision example-") || time.Since(start) > 20*time.Second {
				t.Errorf("%s with no Redis: %v after %s, printed\n%s\nwant a last line saying the decision was not added", ex.name, err, time.Since(start).Round(time.Millisecond), out)
			}
			t.Logf("with no Redis: %s", last)
		})
	}
	t.Run("python client errors", func(t *testing.T) { pythonClientErrors(t, root, d.url) })
	t.Logf("the three examples ran in %s", time.Since(started).Round(time.Second))
}

// pythonErrorsScript prints the Connect code and message of failed calls
// through the Python client, one line each.
const pythonErrorsScript = `
import sys
sys.path.insert(0, "clients/python")
from precept_client import Client, PreceptError
url, token, closed = sys.argv[1:4]
calls = [
    lambda: Client(url, token).get_feedback("no-such-decision"),
    lambda: Client(url, token).call("PromptService", "BuildPrompt", {"agent": "coding-agent", "stgae": "implement"}),
    lambda: Client(url, token).record_feedback({"decision_id": "d-1"}),
    lambda: Client(closed, token).ping(),
]
for call in calls:
    try:
        call()
        print("no error")
    except PreceptError as err:
        print(err.code, err.http_status, err.message)
`

// pythonClientErrors holds the Python client to its promise: a failed
// call raises PreceptError with the Connect code and the server's message.
func pythonClientErrors(t *testing.T, root, url string) {
	cmd := exec.Command(python, "-c", pythonErrorsScript, url, readerToken, "http://"+testenv.FreeAddr(t))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"not_found 404 ", "invalid_argument 400 ", "permission_denied 403 ", "unavailable None "}
	if len(lines) != len(want) {
		t.Fatalf("printed\n%s\nwant %d lines", out, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) || len(lines[i]) == len(w) {
			t.Errorf("call %d: %q, want %q and a message", i+1, lines[i], w)
		}
	}
	if !strings.Contains(lines[1], "stgae") {
		t.Errorf("the unknown field's error does not name it: %q", lines[1])
	}
}

// expectedOutput is what every example prints before its decisions,
// written from the API's answers.
func expectedOutput(p *preceptv1.BuildPromptResponse, e *preceptv1.ExplainPromptResponse) string {
	var b strings.Builder
	rules := strings.Join(p.RuleIds, ", ")
	if rules == "" {
		rules = "(none)"
	}
	fmt.Fprintf(&b, "BuildPrompt agent %s, stage %s, path %s\n", agent, stage, path)
	fmt.Fprintf(&b, "version  %s\ncommit   %s\nrules    %s\n", p.Version, p.Commit, rules)
	fmt.Fprintf(&b, "--- prompt\n%s\n--- end of prompt\n", p.Prompt)
	fmt.Fprintf(&b, "ExplainPrompt\nversion  %s\nbase     %s\nsummary  %s\n", e.Version, e.BasePromptRef, e.Summary)
	for _, f := range e.RulesFiles {
		exists := "absent"
		if f.Exists {
			exists = "exists"
		}
		fmt.Fprintf(&b, "_rules.md %s: %s: %s\n", f.Path, exists, f.Reason)
	}
	for _, r := range e.Rules {
		if r.Included {
			fmt.Fprintf(&b, "rule %s in at position %d: %s\n", r.RuleId, r.Position, r.Reason)
		} else {
			fmt.Fprintf(&b, "rule %s left out: %s\n", r.RuleId, r.Reason)
		}
	}
	return b.String()
}

var sentLine = regexp.MustCompile(`^decision (\S+) \((REJECTED|APPROVED) by (\S+)\) with prompt (\S+) sent as stream entry (\d+-\d+)$`)

// sentEntries reads the lines saying which decisions were sent, and
// returns their stream entries by decision id.
func sentEntries(t *testing.T, lines, prefix, version string) map[string]string {
	t.Helper()
	entries := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		m := sentLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a decision sent: %q", l)
		}
		if m[4] != version {
			t.Errorf("%s sent with prompt %s, want %s", m[1], m[4], version)
		}
		entries[m[1]] = m[5]
	}
	if len(entries) != 2 || entries[prefix+"-1"] == "" || entries[prefix+"-2"] == "" {
		t.Fatalf("decisions sent: %v, want %s-1 and %s-2", entries, prefix, prefix)
	}
	return entries
}

// stored waits until preceptd has stored the decision.
func stored(t *testing.T, ctx context.Context, c preceptv1connect.FeedbackServiceClient, id string, d *preceptd) *preceptv1.Feedback {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := c.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: id}))
		if err == nil {
			return res.Msg.Feedback
		}
		if connect.CodeOf(err) != connect.CodeNotFound || time.Now().After(deadline) {
			t.Fatalf("decision %s not stored: %v\n%s", id, err, d.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func promptOf(t *testing.T, c preceptv1connect.PromptServiceClient) (*preceptv1.BuildPromptResponse, *preceptv1.ExplainPromptResponse) {
	t.Helper()
	ctx := context.Background()
	built, err := c.BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: agent, Stage: stage, ScopePath: path}))
	if err != nil {
		t.Fatal(err)
	}
	why, err := c.ExplainPrompt(ctx, connect.NewRequest(&preceptv1.ExplainPromptRequest{Agent: agent, Stage: stage, ScopePath: path}))
	if err != nil {
		t.Fatal(err)
	}
	return built.Msg, why.Msg
}

// runExample runs an example, which must succeed, and returns its output.
func runExample(t *testing.T, root string, ex example, addr, token, redisAddr string, args ...string) string {
	t.Helper()
	start := time.Now()
	out, err := tryExample(root, ex, addr, token, redisAddr, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(ex.argv, " "), err, out)
	}
	t.Logf("%s ran in %s", ex.name, time.Since(start).Round(time.Millisecond))
	return out
}

// tryExample runs an example against preceptd at addr and Redis at
// redisAddr, with none of the caller's PRECEPT_ variables.
func tryExample(root string, ex example, addr, token, redisAddr string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PRECEPT_") {
			env = append(env, kv)
		}
	}
	if ex.byEnv {
		env = append(env, "PRECEPT_ADDR="+addr, "PRECEPT_TOKEN="+token, "PRECEPT_REDIS_ADDR="+redisAddr)
	} else {
		args = append([]string{"--addr", addr, "--token", token, "--redis", redisAddr}, args...)
	}
	cmd := exec.CommandContext(ctx, ex.argv[0], append(ex.argv[1:], args...)...)
	cmd.Dir = root
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// requireTools fails, naming .ci/install-deps, when what the examples
// need is missing.
func requireTools(t *testing.T, root string) {
	t.Helper()
	for _, tool := range []string{"node", "npm", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the examples need %s on PATH (.ci/install-deps installs it): %v", tool, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "clients/typescript/node_modules/.bin/tsc")); err != nil {
		t.Fatalf("the TypeScript client's npm packages are not installed (.ci/install-deps installs them into clients/typescript/node_modules): %v", err)
	}
	if out, err := exec.Command(python, "-c", "import redis").CombinedOutput(); err != nil {
		t.Fatalf("the Python example needs %s with the redis package (.ci/install-deps installs Debian's python3-redis): %v\n%s", python, err, out)
	}
}

// buildTypeScript compiles the TypeScript client and example with tsc.
func buildTypeScript(t *testing.T, root string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("npm", "run", "--silent", "build", "--prefix", "clients/typescript")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm run build (tsc): %v\n%s", err, out)
	}
	t.Logf("tsc built the TypeScript client and example in %s", time.Since(start).Round(time.Millisecond))
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(string(bytes.TrimSpace(out)))
}

func bearer(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}
}

// preceptd is a preceptd child process.
type preceptd struct {
	url, dataDir string
	out          *testenv.SyncBuffer
}

func (d *preceptd) logs() string { return d.out.String() }

func startPreceptd(t *testing.T, root, redisAddr string) *preceptd {
	t.Helper()
	binary, _ := testenv.PreceptBinaries(t)
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	cfg := filepath.Join(dir, "precept.yaml")
	d := &preceptd{url: "http://" + addr, dataDir: filepath.Join(dir, "data"), out: &testenv.SyncBuffer{}}
	err := os.WriteFile(cfg, fmt.Appendf(nil, `
listen: %s
data_dir: %s
redis: {addr: %q}
feedback: {batch_wait: 20ms}
auth:
  tokens:
    - {name: pipeline, role: reader, token: %s}
    - {name: alice, role: approver, token: %s}
    - {name: bob, role: approver, token: %s}
    - {name: carol, role: approver, token: %s}
`, addr, d.dataDir, redisAddr, readerToken, aliceToken, bobToken, carolToken), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--config", cfg)
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(d.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case <-exited:
			t.Fatalf("preceptd exited at start:\n%s", d.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("preceptd not ready:\n%s", d.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The rules on main: a stage prompt and a _rules.md pushed as a curator
// would (README, "Prompt assembly"), and a learned rule two approvers
// approved through the API.
const (
	stagePrompt = "You implement Go services."
	billingRule = "- Amounts are integer cents; never use float64 for money."
	learnedRule = "Give every network or external call a timeout or deadline."
)

func addRules(t *testing.T, d *preceptd) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "rules-work")
	testenv.Git(t, "", "clone", "-q", filepath.Join(d.dataDir, "rules.git"), work)
	billing := filepath.Join(work, "prompts", "services", "billing")
	if err := os.MkdirAll(billing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "prompts", stage+".md"), []byte(stagePrompt+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(billing, "_rules.md"), []byte(billingRule+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Git(t, work, "add", "prompts")
	testenv.GitAs(t, work, "Carol", "carol@example.com", "commit", "-q", "-m", "Stage prompt and billing rules")
	testenv.Git(t, work, "push", "-q", "origin", "HEAD:main")

	ctx := context.Background()
	as := func(token string) preceptv1connect.RuleServiceClient {
		return preceptv1connect.NewRuleServiceClient(http.DefaultClient, d.url, connect.WithInterceptors(bearer(token)))
	}
	prop, err := as(carolToken).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{agent}, RuleContent: learnedRule, Rationale: "requests hung in production",
	}))
	if err != nil {
		t.Fatalf("propose: %v\n%s", err, d.logs())
	}
	id := prop.Msg.Proposal.ProposalId
	for _, token := range []string{bobToken, aliceToken} {
		if _, err := as(token).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id})); err != nil {
			t.Fatalf("approve %s: %v\n%s", id, err, d.logs())
		}
	}
	// preceptd sees the push within prompts.watch_poll.
	prompts := preceptv1connect.NewPromptServiceClient(http.DefaultClient, d.url, connect.WithInterceptors(bearer(readerToken)))
	// Until it does, main has no stage prompt for it and BuildPrompt
	// answers FailedPrecondition (seen under a loaded make test).
	deadline := time.Now().Add(30 * time.Second)
	for {
		built, err := prompts.BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: agent, Stage: stage, ScopePath: path}))
		if err != nil && connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Fatal(err)
		}
		got := ""
		if err == nil {
			got = built.Msg.Prompt
			if strings.Contains(got, billingRule) && strings.Contains(got, learnedRule) && strings.HasPrefix(got, stagePrompt) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rules are not in the prompt (%v):\n%s\n%s", err, got, d.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
