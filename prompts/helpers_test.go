package prompts

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

func openRepo(t testing.TB) *gitrepo.Repo {
	t.Helper()
	r, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// files maps paths to contents; an empty content deletes the path.
type files map[string]string

func commit(t testing.TB, repo *gitrepo.Repo, msg string, fs files) gitrepo.Hash {
	t.Helper()
	var changes []gitrepo.Change
	for p, c := range fs {
		changes = append(changes, gitrepo.Change{Path: p, Data: []byte(c), Delete: c == ""})
	}
	h, err := repo.Update(context.Background(), "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: msg, Changes: changes}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ruleSpec is the part of a rule tests vary.
type ruleSpec struct {
	id         string
	status     rulefmt.Status
	importance rulefmt.Importance
	confidence float64
	content    string
}

func ruleFile(t testing.TB, s ruleSpec) string {
	t.Helper()
	if s.status == "" {
		s.status = rulefmt.Active
	}
	if s.content == "" {
		s.content = "Follow rule " + s.id + "."
	}
	r := rulefmt.Rule{ID: s.id, ProposalID: "p-" + strings.TrimPrefix(s.id, "r-"), Type: rulefmt.Guideline,
		Status: s.status, Importance: s.importance, Confidence: s.confidence, Content: s.content,
		FeedbackIDs: []string{"d-" + s.id}, Approvals: []rulefmt.Approval{{Approver: "alice", Via: "api"}, {Approver: "bob", Via: "slack"}},
		ActivatedAt: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)}
	if s.status == rulefmt.Shadow {
		until := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		r.ShadowUntil = &until
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ruleFiles renders rule files for one agent.
func ruleFiles(t testing.TB, agent string, specs ...ruleSpec) files {
	fs := files{}
	for _, s := range specs {
		fs[rulefmt.ActiveRulePath(agent, s.id)] = ruleFile(t, s)
	}
	return fs
}

func merge(fss ...files) files {
	out := files{}
	for _, fs := range fss {
		for k, v := range fs {
			out[k] = v
		}
	}
	return out
}

func newAssembler(t testing.TB, repo Repo, opts Options) *Assembler {
	t.Helper()
	a, err := New(repo, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func build(t testing.TB, a *Assembler, req Request) *Prompt {
	t.Helper()
	p, err := a.Build(context.Background(), req)
	if err != nil {
		t.Fatalf("Build(%+v): %v", req, err)
	}
	return p
}

func refresh(t testing.TB, a *Assembler) {
	t.Helper()
	if _, err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func str(s string) *string { return &s }

// countingRepo counts every read prompts make of the repository.
type countingRepo struct {
	Repo
	tips, snapshots, blobs atomic.Int64
}

func (c *countingRepo) Tip(b string) (gitrepo.Hash, error) {
	c.tips.Add(1)
	return c.Repo.Tip(b)
}

func (c *countingRepo) SnapshotAt(h gitrepo.Hash) (*gitrepo.Snapshot, error) {
	c.snapshots.Add(1)
	return c.Repo.SnapshotAt(h)
}

func (c *countingRepo) ReadBlob(h gitrepo.Hash) ([]byte, error) {
	c.blobs.Add(1)
	return c.Repo.ReadBlob(h)
}

func (c *countingRepo) reads() int64 { return c.tips.Load() + c.snapshots.Load() + c.blobs.Load() }

// gitCLI runs the git CLI in dir as a curator would.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return testenv.GitAs(t, dir, "Curator", "curator@example.com", args...)
}
