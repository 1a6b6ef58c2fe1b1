package rules

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// gitCLI runs the git CLI in dir and returns its trimmed output.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return testenv.GitAs(t, dir, "Curator", "curator@example.com", args...)
}

// newClock returns a test clock at a fixed time.
func newClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
}

// fakeSource is an EvidenceSource whose clusters tests set.
type fakeSource struct {
	mu  sync.Mutex
	evs []rulefmt.Evidence
	err error
}

func (f *fakeSource) Generalizable(ctx context.Context) ([]rulefmt.Evidence, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rulefmt.Evidence(nil), f.evs...), f.err
}

func (f *fakeSource) set(evs ...rulefmt.Evidence) {
	f.mu.Lock()
	f.evs = evs
	f.mu.Unlock()
}

// fixture is a Manager on a fresh repository whose main has one commit.
type fixture struct {
	t     *testing.T
	repo  *gitrepo.Repo
	m     *Manager
	src   *fakeSource
	clock *testenv.Clock
	// changes are the transitions OnChange reported.
	mu      sync.Mutex
	changes []rulefmt.Change
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true, Signer: testSigner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	_, err = repo.Update(context.Background(), "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "Base prompts", Changes: []gitrepo.Change{
			{Path: "prompts/coding.md", Data: []byte("You write Go code.\n")},
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return attach(t, repo, opts)
}

// attach opens another Manager on a fixture's repository.
func attach(t *testing.T, repo *gitrepo.Repo, opts Options) *fixture {
	t.Helper()
	f := &fixture{t: t, repo: repo, src: &fakeSource{}, clock: newClock()}
	if opts.Now == nil {
		opts.Now = f.clock.Now
	}
	if opts.Evidence == nil {
		opts.Evidence = f.src
	}
	m, err := New(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	m.OnChange(func(c rulefmt.Change) {
		f.mu.Lock()
		f.changes = append(f.changes, c)
		f.mu.Unlock()
	})
	f.m = m
	return f
}

func (f *fixture) kinds() []rulefmt.ChangeKind {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rulefmt.ChangeKind
	for _, c := range f.changes {
		out = append(out, c.Kind)
	}
	return out
}

// propose drafts from the fake source and returns what was committed.
func (f *fixture) propose(evs ...rulefmt.Evidence) []rulefmt.Proposal {
	f.t.Helper()
	f.src.set(evs...)
	out, err := f.m.ProposeFromEvidence(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// proposeOne drafts one cluster and expects one outcome.
func (f *fixture) proposeOne(ev rulefmt.Evidence) rulefmt.Proposal {
	f.t.Helper()
	out := f.propose(ev)
	if len(out) != 1 {
		f.t.Fatalf("drafting %s committed %d outcomes, want 1: %+v", ev.ClusterID, len(out), out)
	}
	return out[0]
}

func (f *fixture) approve(id, who string) rulefmt.Proposal {
	f.t.Helper()
	p, err := f.m.Approve(context.Background(), ApproveRequest{ProposalID: id, By: who, Via: rulefmt.ViaAPI})
	if err != nil {
		f.t.Fatalf("approve %s by %s: %v", id, who, err)
	}
	return p
}

func (f *fixture) get(id string) rulefmt.Proposal {
	f.t.Helper()
	p, err := f.m.Get(context.Background(), id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return p
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	return gitCLI(f.t, f.repo.Path(), args...)
}

func (f *fixture) fsck() {
	f.t.Helper()
	f.git("fsck", "--strict", "--no-dangling")
}

// readMain reads a file on main, "" when it is missing.
func (f *fixture) readMain(p string) string {
	f.t.Helper()
	s, err := f.repo.Snapshot("main")
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := s.ReadFile(p)
	if err != nil {
		return ""
	}
	return string(b)
}

// cluster builds realistic evidence: comments by distinct reviewers in
// distinct epics.
func cluster(id, agent string, comments ...string) rulefmt.Evidence {
	ev := rulefmt.Evidence{ClusterID: id, Class: rulefmt.ClassGeneralizableHigh, Confidence: 0.86, Agents: []string{agent},
		FirstSeen: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), LastSeen: time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC)}
	for i, c := range comments {
		d := fmt.Sprintf("%s-d%d", id, i+1)
		r := fmt.Sprintf("reviewer-%d", i%3+1)
		ev.FeedbackIDs = append(ev.FeedbackIDs, d)
		ev.Reviewers = append(ev.Reviewers, r)
		ev.Epics = append(ev.Epics, fmt.Sprintf("EPIC-%d", i%2+1))
		ev.Comments = append(ev.Comments, rulefmt.Comment{DecisionID: d, ReviewerID: r, Agent: agent, Text: c, Centrality: 1 - float64(i)/10})
	}
	ev.Size = len(comments)
	ev.Reviewers = rulefmt.Distinct(ev.Reviewers)
	ev.Epics = rulefmt.Distinct(ev.Epics)
	return ev
}

// The evidence of the tests: clusters of realistic reviewer comments.
var (
	testsCluster = []string{
		"missing unit tests for the new retry helper",
		"no tests again. please add unit tests for new functions",
		"The parser change has no test coverage at all.",
	}
	logCluster = []string{
		"Never log API tokens or passwords, even at debug level.",
		"the agent printed the bearer token in the logs",
		"credentials ended up in log output again",
	}
	errorsCluster = []string{
		"Wrap errors returned from the retry loop with the attempt count.",
		"errors from the retry loop lose their context; wrap them",
		"unwrapped error from retry, can't tell which attempt failed",
	}
)

var alice = precept.Identity{Name: "alice", Role: precept.RoleApprover}

// testSigner is the signing key the replicas of one test deployment share.
var testSigner = func() *gitrepo.Signer {
	s, err := gitrepo.NewSigner([]byte("a test deployment's signing key, 32+ bytes"))
	if err != nil {
		panic(err)
	}
	return s
}()
