package rules

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// remoteFixture is a Manager whose repository has a bare remote made
// with the git CLI, and a person's clone of that remote.
type remoteFixture struct {
	*fixture
	remote string
	clone  string
}

func newRemoteFixture(t *testing.T, opts Options) *remoteFixture {
	t.Helper()
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitCLI(t, filepath.Dir(remote), "init", "-q", "--bare", "-b", "main", remote)
	opts.Remote = &Remote{URL: remote, WebURL: "https://git.example.com/org/rules"}
	f := newFixture(t, opts)
	r := &remoteFixture{fixture: f, remote: remote}
	r.sync()
	r.clone = filepath.Join(t.TempDir(), "person")
	gitCLI(t, filepath.Dir(r.clone), "clone", "-q", remote, r.clone)
	return r
}

func (r *remoteFixture) sync() {
	r.t.Helper()
	if err := r.m.Sync(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

// person runs git as a named person in the clone.
func (r *remoteFixture) person(name string, args ...string) string {
	r.t.Helper()
	return testenv.GitAs(r.t, r.clone, name, strings.ToLower(strings.Fields(name)[0])+"@example.com", args...)
}

func (r *remoteFixture) remoteGit(args ...string) string {
	r.t.Helper()
	return gitCLI(r.t, r.remote, args...)
}

func TestProposalBranchesArePushedAndAMergeOnTheRemoteApproves(t *testing.T) {
	ctx := context.Background()
	r := newRemoteFixture(t, Options{})
	p := r.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	r.sync()
	if got := r.remoteGit("rev-parse", "proposal/"+p.ID); got != r.git("rev-parse", "proposal/"+p.ID) {
		t.Fatalf("remote proposal branch at %s", got)
	}
	if got := r.get(p.ID); got.ReviewURL != "https://git.example.com/org/rules/compare/main...proposal/"+p.ID {
		t.Fatalf("review URL = %q", got.ReviewURL)
	}
	// One approval through the API first; then a reviewer merges the rule
	// PR on the git host (here: a --no-ff merge pushed to the remote).
	r.approve(p.ID, "alice")
	r.sync()
	r.person("Jane Reviewer", "fetch", "-q", "origin")
	r.person("Jane Reviewer", "merge", "-q", "--no-ff", "-m", "Merge rule PR "+p.ID, "origin/proposal/"+p.ID)
	r.person("Jane Reviewer", "push", "-q", "origin", "main")
	merge := r.person("Jane Reviewer", "rev-parse", "HEAD")

	r.sync()
	got := r.get(p.ID)
	if got.Status != rulefmt.Approved || got.RuleID == "" {
		t.Fatalf("after the remote merge = %+v", got)
	}
	rule, _, err := r.m.Rule(ctx, got.RuleID)
	if err != nil || rule.Status != rulefmt.Active {
		t.Fatalf("rule = %+v, %v", rule, err)
	}
	var approvers []string
	for _, a := range rule.Approvals {
		approvers = append(approvers, a.Approver+"/"+a.Via)
	}
	if !slices.Equal(approvers, []string{"alice/api", "Jane Reviewer/git"}) {
		t.Fatalf("approvals = %v", approvers)
	}
	// The conversion commit is on main locally and on the remote, after
	// the person's merge, with the trailers.
	if r.remoteGit("rev-parse", "main") != r.git("rev-parse", "main") {
		t.Fatal("main was not pushed after the conversion")
	}
	trailers := r.remoteGit("log", "-1", "--format=%(trailers)", "main")
	for _, want := range []string{"Approved-by: Jane Reviewer <jane@example.com>", "Merge-Commit: " + merge, "Rule-Id: " + got.RuleID} {
		if !strings.Contains(trailers, want) {
			t.Errorf("conversion trailers lack %q:\n%s", want, trailers)
		}
	}
	if parent := r.remoteGit("rev-parse", "main^1"); parent != merge {
		t.Fatalf("conversion parent = %s, want the person's merge %s", parent, merge)
	}
	if strings.Contains(r.remoteGit("ls-tree", "--name-only", "-r", "main"), "rules/proposals/") {
		t.Fatal("the merged proposal file stayed on main")
	}
	if !slices.Contains(r.kinds(), rulefmt.RuleMerged) {
		t.Fatalf("changes = %v", r.kinds())
	}

	// Rolling the rule back restores main as it was before the merge.
	before := merge + "^1"
	changed := strings.Fields(r.git("diff", "--name-only", before, got.MergedCommit))
	if _, err := r.m.Rollback(ctx, RollbackRequest{RuleID: got.RuleID, By: "carol", Reason: "Too strict for generated code."}); err != nil {
		t.Fatal(err)
	}
	for _, path := range changed {
		if diff := r.git("diff", before, "main", "--", path); diff != "" {
			t.Errorf("%s differs from before the merge:\n%s", path, diff)
		}
	}
	if strings.Contains(r.git("ls-tree", "--name-only", "-r", "main"), "rules/proposals/") {
		t.Fatal("the rollback brought the proposal file back")
	}
	r.sync()
	r.fsck()
	r.remoteGit("fsck", "--strict", "--no-dangling")
}

func TestABranchDeletedOnTheRemoteRejectsTheProposal(t *testing.T) {
	ctx := context.Background()
	r := newRemoteFixture(t, Options{})
	p := r.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	keep := r.proposeOne(cluster("c-errors", "coding-agent", errorsCluster...))
	r.sync()
	r.person("Jane Reviewer", "push", "-q", "origin", ":proposal/"+p.ID)

	r.sync()
	got := r.get(p.ID)
	if got.Status != rulefmt.Rejected || got.Rejection.Via != rulefmt.ViaGit || !strings.Contains(got.Rejection.Reason, "deleted on origin without being merged") {
		t.Fatalf("after the deletion = %+v", got)
	}
	if r.get(keep.ID).Status != rulefmt.Pending {
		t.Fatal("another proposal was decided too")
	}
	if !strings.Contains(r.remoteGit("ls-tree", "--name-only", "-r", "main"), "rules/rejected/"+p.ID+".md") {
		t.Fatal("the rejection was not pushed")
	}
	if _, err := r.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI}); err == nil {
		t.Fatal("approved a proposal rejected in git")
	}
	// A rejection through the API deletes the remote branch.
	if _, err := r.m.Reject(ctx, RejectRequest{ProposalID: keep.ID, By: "alice", Reason: "Covered by the linter.", Via: rulefmt.ViaAPI}); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if branches := r.remoteGit("branch", "--list", "proposal/*"); branches != "" {
		t.Fatalf("remote proposal branches after the rejections: %q", branches)
	}
	r.sync() // deleting again is not an error, and nothing is re-pushed
	r.fsck()
}

func TestRemoteCommitsAreMergedWithoutLosingLocalOnes(t *testing.T) {
	ctx := context.Background()
	r := newRemoteFixture(t, Options{})
	// The remote moves: a curator adds _rules.md and edits the stage
	// prompt; meanwhile precept approves a rule locally and someone
	// edits the same stage prompt locally.
	os.MkdirAll(filepath.Join(r.clone, "prompts", "api"), 0o755)
	os.WriteFile(filepath.Join(r.clone, "prompts", "api", "_rules.md"), []byte("Version every endpoint.\n"), 0o644)
	os.WriteFile(filepath.Join(r.clone, "prompts", "coding.md"), []byte("You write Go code. Remote edit.\n"), 0o644)
	r.person("Cora Curator", "add", ".")
	r.person("Cora Curator", "commit", "-q", "-m", "Curate prompts")
	r.person("Cora Curator", "push", "-q", "origin", "main")

	p := r.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	r.approve(p.ID, "alice")
	merged := r.approve(p.ID, "bob")
	_, err := r.repo.Update(ctx, "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "Local edit", Changes: []gitrepo.Change{{Path: "prompts/coding.md", Data: []byte("You write Go code. Local edit.\n")}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	local := r.git("rev-parse", "main")

	r.sync()
	if ok := r.git("merge-base", "--is-ancestor", local, "main"); ok != "" {
		t.Fatal(ok)
	}
	head := r.git("log", "-1", "--format=%s%n%P%n%(trailers:key=Remote-Sync,valueonly)", "main")
	if !strings.HasPrefix(head, "Merge origin/main into main") || !strings.Contains(head, "origin/main") {
		t.Fatalf("merge commit = %q", head)
	}
	if r.readMain("prompts/api/_rules.md") != "Version every endpoint.\n" {
		t.Fatal("the remote's new file is missing")
	}
	if r.readMain("prompts/coding.md") != "You write Go code. Remote edit.\n" {
		t.Fatalf("a true conflict did not prefer the remote: %q", r.readMain("prompts/coding.md"))
	}
	if rules, _ := r.m.ActiveRules(ctx, "coding-agent"); len(rules) != 1 || rules[0].ID != merged.RuleID {
		t.Fatalf("the local approval was lost: %+v", rules)
	}
	if r.remoteGit("rev-parse", "main") != r.git("rev-parse", "main") {
		t.Fatal("the merged main was not pushed")
	}
	if !slices.Contains(r.kinds(), rulefmt.RemoteSynced) {
		t.Fatalf("changes = %v", r.kinds())
	}
	r.fsck()
}

func TestReplicasWithTheirOwnRepositoriesShareProposalsAndApprovalsThroughTheRemote(t *testing.T) {
	ctx := context.Background()
	a := newRemoteFixture(t, Options{RequiredApprovals: 3})
	p := a.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	a.sync()

	// Replica b has its own data directory and only the remote in common.
	repoB, err := gitrepo.Open(filepath.Join(t.TempDir(), "b.git"), gitrepo.Options{NoFsync: true, Signer: testSigner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repoB.Close() })
	b := attach(t, repoB, Options{RequiredApprovals: 3, Remote: &Remote{URL: a.remote}})
	if err := b.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.get(p.ID); got.Status != rulefmt.Pending || got.Content != p.Content {
		t.Fatalf("replica b sees %+v", got)
	}
	// Both record an approval before syncing: the branch diverges, and
	// the sync joins both approvals.
	a.approve(p.ID, "alice")
	b.approve(p.ID, "bob")
	a.sync()
	if err := b.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	a.sync()
	for name, f := range map[string]*fixture{"a": a.fixture, "b": b} {
		got := f.get(p.ID)
		var who []string
		for _, ap := range got.Approvals {
			who = append(who, ap.Approver)
		}
		slices.Sort(who)
		if !slices.Equal(who, []string{"alice", "bob"}) {
			t.Fatalf("replica %s approvals = %v", name, who)
		}
	}
	// The third approval on b merges; a follows.
	if got := b.approve(p.ID, "carol"); got.Status != rulefmt.Approved || got.MergedCommit == "" {
		t.Fatalf("third approval = %+v", got)
	}
	if err := b.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	a.sync()
	if rules, _ := a.m.ActiveRules(ctx, "coding-agent"); len(rules) != 1 {
		t.Fatalf("replica a's active rules = %+v", rules)
	}
	a.fsck()
}

func TestAMergeIntoTheLocalMainInGitIsAnApprovalByTheAuthorWhenAHostCommitted(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	work := filepath.Join(t.TempDir(), "w")
	gitCLI(t, filepath.Dir(work), "clone", "-q", f.repo.Path(), work)
	// A git host's web UI commits as itself, in the name of the person
	// who clicked merge.
	cmd := exec.Command("git", "merge", "-q", "--no-ff", "-m", "Merge pull request #7", "origin/proposal/"+p.ID)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Jane Reviewer", "GIT_AUTHOR_EMAIL=jane@example.com",
		"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git merge: %v\n%s", err, out)
	}
	gitCLI(t, work, "push", "-q", "origin", "main")

	if got := f.get(p.ID); got.Status != rulefmt.Pending {
		t.Fatalf("before maintenance = %s", got.Status)
	}
	if _, err := f.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI}); precept.ErrorCode(err) != precept.FailedPrecondition {
		t.Fatalf("approving a proposal merged in git: %v", err)
	}
	if err := f.m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.get(p.ID)
	if got.Status != rulefmt.Approved || len(got.Approvals) != 1 || got.Approvals[0].Approver != "Jane Reviewer" || got.Approvals[0].Via != rulefmt.ViaGit {
		t.Fatalf("after maintenance = %+v", got)
	}
	if strings.Contains(f.git("ls-tree", "-r", "--name-only", "main"), rulefmt.ProposalsDir) {
		t.Fatal("the merged proposal file stayed on main")
	}
	if tr := f.git("log", "-1", "--format=%(trailers:key=Approved-by,valueonly)", "main"); tr != "Jane Reviewer <jane@example.com>" {
		t.Fatalf("Approved-by = %q", tr)
	}
	f.fsck()
}

func TestOtherBranchesAreKeptInStepWithTheRemote(t *testing.T) {
	ctx := context.Background()
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitCLI(t, filepath.Dir(remote), "init", "-q", "--bare", "-b", "main", remote)
	f := newFixture(t, Options{Remote: &Remote{URL: remote, Branches: []string{"precept/notes"}}})
	write := func(repo *gitrepo.Repo, path, data string) {
		t.Helper()
		_, err := repo.Update(ctx, "precept/notes", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			return &gitrepo.CommitSpec{Message: "Note " + path, Changes: []gitrepo.Change{{Path: path, Data: []byte(data)}}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A local commit on the branch is pushed.
	write(f.repo, "notes/a.yaml", "a: 1\n")
	if err := f.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, remote, "show", "precept/notes:notes/a.yaml"); got != "a: 1" {
		t.Fatalf("remote notes/a.yaml = %q", got)
	}
	// Another replica's commit on the remote comes in, merged with a
	// local commit made meanwhile.
	other := attach(t, openRepo(t), Options{Remote: &Remote{URL: remote, Branches: []string{"precept/notes"}}})
	if err := other.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	write(other.repo, "notes/b.yaml", "b: 2\n")
	if err := other.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	write(f.repo, "notes/c.yaml", "c: 3\n")
	if err := f.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"notes/a.yaml", "notes/b.yaml", "notes/c.yaml"} {
		if gitCLI(t, f.repo.Path(), "show", "precept/notes:"+p) == "" || gitCLI(t, remote, "show", "precept/notes:"+p) == "" {
			t.Fatalf("%s is missing locally or on the remote", p)
		}
	}
}

// openRepo opens an empty repository.
func openRepo(t *testing.T) *gitrepo.Repo {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true, Signer: testSigner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	return repo
}

func TestSyncRoundsAreCountedFailedWhenTheRemoteIsDown(t *testing.T) {
	ctx := context.Background()
	r := newRemoteFixture(t, Options{})
	first := r.m.RemoteSyncs()
	if got := first; got.OK != 1 || got.Failed != 0 || got.LastOK.IsZero() {
		t.Fatalf("after the first sync: %+v, want one ok, and when", got)
	}
	// The remote goes away: the fetch of every round fails, before any
	// push is tried, and each round counts as a failed sync.
	away := r.remote + ".away"
	if err := os.Rename(r.remote, away); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := r.m.Sync(ctx); err == nil {
			t.Fatal("a sync with the remote gone succeeded")
		}
	}
	if got := r.m.RemoteSyncs(); got != (SyncStats{OK: 1, Failed: 2, LastOK: first.LastOK}) {
		t.Fatalf("after two syncs with the remote down: %+v, want 1 ok and 2 failed, the last ok still the first", got)
	}
	// Back: the next round succeeds and counts.
	if err := os.Rename(away, r.remote); err != nil {
		t.Fatal(err)
	}
	r.sync()
	if got := r.m.RemoteSyncs(); got.OK != 2 || got.Failed != 2 || !got.LastOK.After(first.LastOK) {
		t.Fatalf("after the remote came back: %+v, want 2 ok and 2 failed, the last ok later than %s", got, first.LastOK)
	}
	// A sync cancelled by its caller is not a failure of the remote.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_ = r.m.Sync(cancelled)
	if got := r.m.RemoteSyncs(); got.Failed != 2 {
		t.Fatalf("a cancelled sync counted as failed: %+v", got)
	}
	// Without a remote there is nothing to count.
	if got := newFixture(t, Options{}).m.RemoteSyncs(); got != (SyncStats{}) {
		t.Fatalf("no remote: %+v", got)
	}
}
