package app

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

// A curator pushes a _rules.md to the rules repository's remote with the
// git CLI; the rule manager's periodic fetch merges it into local main and
// prompt watchers get the new version, with no hand-moved refs.
func TestARulesFilePushedToTheRemoteReachesWatchersThroughTheRemoteSync(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	promptGit(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", remote)
	r := start(t, fmt.Sprintf("rules: {git: {remote_url: %q, fetch_interval: 200ms}}\nprompts: {watch_poll: 1h}\n", remote))
	commitRulesRepo(t, r.app.RulesRepo, "stage prompt", map[string]string{"prompts/implement.md": "You implement tasks."})

	// precept pushes main to the remote; the curator works from a clone of it.
	clone := filepath.Join(t.TempDir(), "curator")
	eventually(t, "main on the remote", 20*time.Second, func() bool {
		out, err := gitOut(remote, "rev-parse", "--verify", "-q", "main")
		return err == nil && strings.TrimSpace(out) != ""
	})
	promptGit(t, t.TempDir(), "clone", "-q", remote, clone)

	c := promptServiceClient(r.app.URL(), "connect")
	req := &preceptv1.WatchPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "services/billing/api.go"}
	// The stage prompt was committed behind precept's back: tell prompts.
	r.app.Prompts.Notify()
	eventually(t, "the stage prompt", 10*time.Second, func() bool {
		_, err := c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: req.Agent, Stage: req.Stage}))
		return err == nil
	})
	w := openPromptWatch(t, c, req)
	first := w.next(t, 10*time.Second)
	if strings.Contains(first.Prompt.Prompt, "Directory Rules") {
		t.Fatalf("unexpected rules before the push:\n%s", first.Prompt.Prompt)
	}

	// Watch polling is off (1h): only the remote sync's notification can
	// deliver the change.
	writeAndPush(t, clone, "Add billing rules", map[string]string{"prompts/services/billing/_rules.md": "Amounts are integers in cents.\n"})
	got := w.next(t, 20*time.Second)
	if !strings.Contains(got.Prompt.Prompt, "## Directory Rules (prompts/services/billing/_rules.md)\n\nAmounts are integers in cents.") {
		t.Fatalf("after the push to the remote:\n%s", got.Prompt.Prompt)
	}
	if got.Prompt.Version == first.Prompt.Version {
		t.Fatal("the version did not change")
	}
	if out, _ := gitOut(r.app.RulesRepo.Path(), "log", "--format=%s", "-3", "main"); !strings.Contains(out, "Add billing rules") {
		t.Fatalf("local main lacks the curator's commit:\n%s", out)
	}
}

// gitOut runs the git CLI in dir.
func gitOut(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	return string(out), err
}

// A rules remote that does not offer atomic pushes is refused at start,
// with an error naming the capability: the git library would otherwise
// drop the atomic option without a word, and two nodes could each land
// half of a decision.
func TestARulesRemoteWithoutAtomicPushesIsRefusedAtStart(t *testing.T) {
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "rules", "main", map[string]string{"README.md": "rules\n"})
	testenv.Git(t, srv.Dir("rules"), "config", "receive.advertiseAtomic", "false")
	cfg, err := config.Parse(fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nnode: test-node\nredis: {addr: %q}\nrules: {git: {remote_url: %q}}\n",
		t.TempDir(), testenv.Redis(t), url), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		a.Close()
		t.Fatal("a rules remote without atomic pushes was accepted")
	}
	if !strings.Contains(err.Error(), `"atomic"`) || !strings.Contains(err.Error(), "rules.git.remote_url") {
		t.Fatalf("the error does not name the capability and the setting: %v", err)
	}
}
