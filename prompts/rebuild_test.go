package prompts

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestBuildAtAssemblesAPastCommitAndLeavesTheServedPromptsAlone(t *testing.T) {
	repo := openRepo(t)
	var specs []ruleSpec
	for i := range 5 {
		specs = append(specs, ruleSpec{id: fmt.Sprintf("r-%d", i)})
	}
	first := commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base.", "prompts/_rules.md": "Root."}, ruleFiles(t, "coding-agent", specs...)))
	counting := &countingRepo{Repo: repo}
	var assembled atomic.Int64
	a := newAssembler(t, counting, Options{OnAssembled: func(Request, *Prompt) { assembled.Add(1) }})
	old := build(t, a, implement)

	commit(t, repo, "one more rule", ruleFiles(t, "coding-agent", ruleSpec{id: "r-new", content: "A new rule."}))
	refresh(t, a)
	now := build(t, a, implement)
	if now.Version == old.Version {
		t.Fatal("the new commit did not change the prompt")
	}
	stats, calls := a.Stats(), assembled.Load()

	blobs := counting.blobs.Load()
	p, err := a.BuildAt(context.Background(), implement, first.String())
	if err != nil {
		t.Fatal(err)
	}
	if p.Text != old.Text || p.Version != old.Version || p.Commit != first.String() || !slices.Equal(p.RuleIDs, old.RuleIDs) {
		t.Fatalf("BuildAt(first) = %q (%s, commit %s), want %q (%s)", p.Text, p.Version, p.Commit, old.Text, old.Version)
	}
	if got := counting.blobs.Load() - blobs; got != 0 {
		t.Fatalf("BuildAt read %d blobs the live index already held", got)
	}
	if got := build(t, a, implement); got != now {
		t.Fatal("BuildAt changed the prompt served")
	}
	after := a.Stats()
	if after.CachedPrompts != stats.CachedPrompts || after.CacheMisses != stats.CacheMisses || after.Commit != stats.Commit || assembled.Load() != calls {
		t.Fatalf("BuildAt touched the served state: stats %+v then %+v, OnAssembled %d then %d", stats, after, calls, assembled.Load())
	}

	// The live loader still remembers the current commit's blobs: a
	// change of one file reads one blob.
	commit(t, repo, "one rule changed", ruleFiles(t, "coding-agent", ruleSpec{id: "r-1", content: "Changed."}))
	blobs = counting.blobs.Load()
	refresh(t, a)
	if got := counting.blobs.Load() - blobs; got != 1 {
		t.Fatalf("refresh after BuildAt read %d blobs, want 1", got)
	}
}

func TestBuildAtSaysWhatIsWrongWithTheCommitOrRequest(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		req    Request
		commit string
		code   precept.Code
		want   string
	}{
		{"not hex", implement, "main", precept.Invalid, "not a full hexadecimal commit id"},
		{"short", implement, "abcdef", precept.Invalid, "not a full hexadecimal commit id"},
		{"unknown", implement, strings.Repeat("ab", 20), precept.NotFound, "not in the rules repository"},
		{"before main existed", implement, "", precept.FailedPrecondition, "no base prompt"},
		{"bad agent", Request{Agent: "../x", Stage: "implement"}, "", precept.Invalid, "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.BuildAt(ctx, tc.req, tc.commit)
			if precept.ErrorCode(err) != tc.code || !strings.Contains(precept.ErrorMessage(err), tc.want) {
				t.Fatalf("BuildAt = %v (%s), want %s containing %q", err, precept.ErrorCode(err), tc.code, tc.want)
			}
		})
	}
}

func TestRebuildGivesTheTextOfEachRecordedVersion(t *testing.T) {
	repo := openRepo(t)
	versions := NewVersions(repo, nil, nil)
	a := newAssembler(t, repo, Options{OnAssembled: versions.Observe})
	commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base.", "prompts/src/_rules.md": "Src."},
		ruleFiles(t, "coding-agent", ruleSpec{id: "r-1"}, ruleSpec{id: "r-2", status: rulefmt.Shadow})))
	refresh(t, a)
	served := map[string]string{}
	serve := func(p *Prompt) {
		served[p.Version], served[p.ShadowVersion] = p.Text, p.ShadowText
	}
	serve(build(t, a, implement))
	serve(build(t, a, Request{Agent: "coding-agent", Stage: "implement"}))
	base := "Own base."
	build(t, a, Request{Agent: "coding-agent", Stage: "implement", BasePrompt: &base})

	commit(t, repo, "another", merge(files{"prompts/src/_rules.md": "Src, changed."}, ruleFiles(t, "coding-agent", ruleSpec{id: "r-3"})))
	refresh(t, a)
	serve(build(t, a, implement))

	// Four requests, each with a main and a shadow version.
	records := versions.All()
	if len(records) != 8 {
		t.Fatalf("%d versions recorded, want 8", len(records))
	}
	if shadows := versions.Select(func(r VersionRecord) bool { return r.Shadow }); len(shadows) != 4 {
		t.Fatalf("Select(shadow) = %d records, want 4", len(shadows))
	}
	ctx := context.Background()
	for _, r := range records {
		text, err := a.Rebuild(ctx, r)
		if r.BasePrompt == RequestRef {
			if precept.ErrorCode(err) != precept.FailedPrecondition || !strings.Contains(err.Error(), "cannot be rebuilt") {
				t.Errorf("Rebuild of a version with the request's base prompt = %v, want FailedPrecondition", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Rebuild(%s): %v", r.Version, err)
			continue
		}
		if text != served[r.Version] {
			t.Errorf("Rebuild(%s, shadow %v) = %q, served %q", r.Version, r.Shadow, text, served[r.Version])
		}
	}

	// With a smaller budget the old commit no longer gives the old text.
	small := newAssembler(t, repo, Options{MaxRules: 1})
	for _, r := range records {
		if len(r.RuleIDs) < 2 || r.BasePrompt == RequestRef {
			continue
		}
		if _, err := small.Rebuild(ctx, r); precept.ErrorCode(err) != precept.FailedPrecondition || !strings.Contains(err.Error(), "configuration") {
			t.Errorf("Rebuild(%s) with max_rules 1 = %v, want FailedPrecondition about the configuration", r.Version, err)
		}
	}
}

func TestRebuiltTextsAreKeptLeastRecentlyUsedFirstOut(t *testing.T) {
	c := newTextLRU(2)
	c.put("a", "A")
	c.put("b", "B")
	if _, ok := c.get("a"); !ok {
		t.Fatal("a is missing")
	}
	c.put("c", "C") // b is the least recently used
	if _, ok := c.get("b"); ok {
		t.Fatal("b was kept past the bound")
	}
	for v, want := range map[string]string{"a": "A", "c": "C"} {
		if got, ok := c.get(v); !ok || got != want {
			t.Fatalf("get(%s) = %q, %v", v, got, ok)
		}
	}
	if c.order.Len() != 2 || len(c.byKey) != 2 {
		t.Fatalf("%d entries, %d keys", c.order.Len(), len(c.byKey))
	}
}

func TestAgentsAndStagesAreThoseOnMain(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base.", "prompts/review.md": "Review.", "prompts/src/_rules.md": "Src."},
		ruleFiles(t, "coding-agent", ruleSpec{id: "r-1"}), ruleFiles(t, "review-agent", ruleSpec{id: "r-2"})))
	a := newAssembler(t, repo, Options{})
	if got := a.Agents(); !slices.Equal(got, []string{"coding-agent", "review-agent"}) {
		t.Errorf("Agents() = %v", got)
	}
	if got := a.Stages(); !slices.Equal(got, []string{"implement", "review"}) {
		t.Errorf("Stages() = %v", got)
	}
}
