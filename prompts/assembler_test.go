package prompts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestCachedBuildReadsNoGitAndAllocatesNothing(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "rules", merge(files{
		"prompts/implement.md":      "Base.",
		"prompts/_rules.md":         "Root.",
		"prompts/src/_rules.md":     "Src.",
		"prompts/src/api/_rules.md": "API.",
	}, ruleFiles(t, "coding-agent", ruleSpec{id: "r-1"}, ruleSpec{id: "r-2"})))
	counting := &countingRepo{Repo: repo}
	a := newAssembler(t, counting, Options{})
	first := build(t, a, implement)
	reads := counting.reads()

	other := implement
	other.ScopePath = "src/api/other_file.go"
	withBase := implement
	withBase.BasePrompt = str("Own base.")
	build(t, a, withBase)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		for _, req := range []Request{implement, other, withBase} {
			p, err := a.Build(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if req.BasePrompt == nil && p != first {
				t.Fatal("a file in the same directory got a different prompt")
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per cached Build round", allocs)
	}
	if got := counting.reads(); got != reads {
		t.Fatalf("cached builds read git %d times", got-reads)
	}
	s := a.Stats()
	if s.CacheMisses != 2 || s.CacheHits < 600 || s.CachedPrompts != 2 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestRefreshReadsOnlyTheFilesThatChanged(t *testing.T) {
	repo := openRepo(t)
	var specs []ruleSpec
	for _, id := range []string{"r-1", "r-2", "r-3", "r-4", "r-5"} {
		specs = append(specs, ruleSpec{id: id})
	}
	commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base.", "prompts/_rules.md": "Root."}, ruleFiles(t, "coding-agent", specs...)))
	counting := &countingRepo{Repo: repo}
	a := newAssembler(t, counting, Options{})
	if got := counting.blobs.Load(); got != 7 {
		t.Fatalf("first load read %d blobs, want 7", got)
	}

	if moved, err := a.Refresh(context.Background()); err != nil || moved {
		t.Fatalf("refresh without a commit: moved %v, %v", moved, err)
	}
	commit(t, repo, "one rule", ruleFiles(t, "coding-agent", ruleSpec{id: "r-3", content: "Changed."}))
	before := counting.blobs.Load()
	if moved, err := a.Refresh(context.Background()); err != nil || !moved {
		t.Fatalf("refresh after a commit: moved %v, %v", moved, err)
	}
	if got := counting.blobs.Load() - before; got != 1 {
		t.Fatalf("refresh read %d blobs, want only the changed one", got)
	}
	if p := build(t, a, implement); !strings.Contains(p.Text, "- [r-3] Changed.") {
		t.Fatalf("text:\n%s", p.Text)
	}
}

// watcher collects a watch's updates.
type watcher struct {
	updates chan Update
	done    chan error
	cancel  context.CancelFunc
}

func watch(t *testing.T, a *Assembler, req Request, last string) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{updates: make(chan Update, 16), done: make(chan error, 1), cancel: cancel}
	go func() {
		w.done <- a.Watch(ctx, req, last, func(u Update) error { w.updates <- u; return nil })
	}()
	t.Cleanup(cancel)
	return w
}

func (w *watcher) next(t *testing.T) Update {
	t.Helper()
	select {
	case u := <-w.updates:
		return u
	case err := <-w.done:
		t.Fatalf("watch ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
	}
	return Update{}
}

func run(t *testing.T, a *Assembler) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestNotifyWakesWatchersOnACommitAndOnItsRevert(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	// Polling is effectively off: only Notify can make the watcher see
	// the commits.
	a := newAssembler(t, repo, Options{PollInterval: time.Hour})
	run(t, a)
	w := watch(t, a, implement, "")

	first := w.next(t)
	if first.Reason != Initial || strings.Contains(first.Prompt.Text, "r-new") {
		t.Fatalf("first update = %+v", first)
	}
	commit(t, repo, "approve r-new", ruleFiles(t, "coding-agent", ruleSpec{id: "r-new", content: "Check the error of Close."}))
	start := time.Now()
	a.Notify()
	added := w.next(t)
	t.Logf("commit to watcher: %s", time.Since(start))
	if added.Reason != Changed || !strings.Contains(added.Prompt.Text, "- [r-new] Check the error of Close.") || added.Prompt.Version == first.Prompt.Version {
		t.Fatalf("after approval: %+v", added)
	}
	commit(t, repo, "roll back r-new", files{rulefmt.ActiveRulePath("coding-agent", "r-new"): ""})
	a.Notify()
	reverted := w.next(t)
	if reverted.Reason != Changed || reverted.Prompt.Version != first.Prompt.Version || strings.Contains(reverted.Prompt.Text, "r-new") {
		t.Fatalf("after rollback: %+v", reverted)
	}
}

func TestPollingSeesAPushOfARulesFileWithTheGitCLI(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{PollInterval: 10 * time.Millisecond})
	run(t, a)
	w := watch(t, a, implement, "")
	first := w.next(t)

	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, t.TempDir(), "clone", "-q", repo.Path(), clone)
	if err := os.MkdirAll(filepath.Join(clone, "prompts", "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "prompts", "src", "_rules.md"), []byte("Never log request bodies.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, clone, "add", ".")
	gitCLI(t, clone, "commit", "-q", "-m", "Add rules for src")
	gitCLI(t, clone, "push", "-q", "origin", "HEAD:main")

	u := w.next(t)
	if u.Reason != Changed || !strings.Contains(u.Prompt.Text, "## Directory Rules (prompts/src/_rules.md)\n\nNever log request bodies.") {
		t.Fatalf("after the push: %+v (first %s)", u, first.Prompt.Version)
	}
	if u.Prompt.Commit != gitCLI(t, clone, "rev-parse", "HEAD") {
		t.Fatalf("commit %s is not the pushed one", u.Prompt.Commit)
	}
}

func TestWatchStartsWithTheCurrentPromptAndSaysWhetherTheClientMissedIt(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{})
	current := build(t, a, implement)
	tests := []struct {
		name string
		last string
		want UpdateReason
	}{
		{"first connection", "", Initial},
		{"reconnect, nothing missed", current.Version, Initial},
		{"reconnect after a change", "v1:0123456789abcdef", Changed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := watch(t, a, implement, tt.last)
			u := w.next(t)
			if u.Reason != tt.want || u.Prompt != current {
				t.Fatalf("first update = %s %s, want %s %s", u.Reason, u.Prompt.Version, tt.want, current.Version)
			}
		})
	}
}

func TestWatchersHearOnlyOfChangesToTheirPrompt(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{})
	w := watch(t, a, implement, "")
	w.next(t)

	commit(t, repo, "other agent", ruleFiles(t, "docs-agent", ruleSpec{id: "r-docs"}))
	refresh(t, a)
	commit(t, repo, "sibling directory", files{"prompts/web/_rules.md": "Web."})
	refresh(t, a)
	commit(t, repo, "shadow rule", ruleFiles(t, "coding-agent", ruleSpec{id: "r-shadow", status: rulefmt.Shadow}))
	refresh(t, a)

	u := w.next(t)
	if u.Prompt.ShadowRuleIDs == nil || u.Prompt.ShadowRuleIDs[0] != "r-shadow" {
		t.Fatalf("the first update after unrelated commits is %+v, want the shadow change", u.Prompt)
	}
}

func TestASlowWatcherDoesNotDelayOthersAndCatchesUpWithTheLatest(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{})

	release := make(chan struct{})
	slow := make(chan Update, 16)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go a.Watch(ctx, implement, "", func(u Update) error {
		slow <- u
		if u.Reason == Changed {
			<-release
		}
		return nil
	})
	<-slow
	fast := watch(t, a, implement, "")
	fast.next(t)

	var last *Prompt
	for _, id := range []string{"r-1", "r-2", "r-3"} {
		commit(t, repo, id, ruleFiles(t, "coding-agent", ruleSpec{id: id}))
		refresh(t, a)
		u := fast.next(t)
		if !strings.Contains(u.Prompt.Text, "["+id+"]") {
			t.Fatalf("fast watcher got %s, want the version with %s", u.Prompt.Version, id)
		}
		last = u.Prompt
	}
	close(release)
	for {
		select {
		case u := <-slow:
			if u.Prompt == last {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the slow watcher never reached the latest version")
		}
	}
}

func TestWatchersEndUnavailableWhenRunStops(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{})
	stop := run(t, a)
	w := watch(t, a, implement, "")
	w.next(t)
	stop()
	select {
	case err := <-w.done:
		if precept.ErrorCode(err) != precept.Unavailable {
			t.Fatalf("watch ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not end")
	}
	if got := a.Stats().Watchers; got != 0 {
		t.Fatalf("%d watchers after the end", got)
	}
}

func TestWatchEndsWhenThePromptCannotBeBuiltAnyMore(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{})
	w := watch(t, a, implement, "")
	w.next(t)
	commit(t, repo, "remove the stage", files{"prompts/implement.md": ""})
	refresh(t, a)
	select {
	case err := <-w.done:
		if precept.ErrorCode(err) != precept.FailedPrecondition {
			t.Fatalf("watch ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not end")
	}
}

// failingRepo fails Tip on demand.
type failingRepo struct {
	Repo
	mu   sync.Mutex
	fail error
}

func (f *failingRepo) Tip(b string) (gitrepo.Hash, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return gitrepo.ZeroHash, f.fail
	}
	return f.Repo.Tip(b)
}

func TestAFailingRepositoryKeepsTheLastGoodPromptsServed(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	f := &failingRepo{Repo: repo}
	a := newAssembler(t, f, Options{})
	good := build(t, a, implement)

	f.mu.Lock()
	f.fail = errors.New("disk on fire")
	f.mu.Unlock()
	commit(t, repo, "change", files{"prompts/implement.md": "Changed."})
	if _, err := a.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("refresh error = %v", err)
	}
	if p := build(t, a, implement); p != good {
		t.Fatal("a failed refresh changed the served prompt")
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	refresh(t, a)
	if p := build(t, a, implement); !strings.HasPrefix(p.Text, "Changed.") {
		t.Fatalf("after recovery:\n%s", p.Text)
	}
	if s := a.Stats(); s.RefreshErrors != 1 || s.Rebuilds != 2 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestNewFailsWhenTheRepositoryCannotBeRead(t *testing.T) {
	f := &failingRepo{Repo: openRepo(t), fail: errors.New("permission denied")}
	if _, err := New(f, Options{}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("New = %v", err)
	}
}
