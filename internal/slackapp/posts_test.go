package slackapp

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules"
)

func TestSlackPostIsKeptWithoutChangingTheRevision(t *testing.T) {
	ctx := context.Background()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	m, err := rules.New(repo, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Propose(ctx, rules.ManualProposal{Agents: []string{"coding-agent"}, Content: "Include unit tests for every new function."},
		precept.Identity{Name: "alice", Role: precept.RoleApprover})
	if err != nil {
		t.Fatal(err)
	}
	post := Post{Channel: "C123", TS: "1700000000.000100", Permalink: "https://slack.example/p1", Posted: true, Attempts: 1, PostedRevision: 1}
	if err := NewPosts(repo, m, nil, nil).Set(ctx, p.ID, post); err != nil {
		t.Fatal(err)
	}
	// Another Posts (a restarted server) sees where it was posted.
	got, ok, err := NewPosts(repo, m, nil, nil).Get(ctx, p.ID)
	if err != nil || !ok || got.TS != post.TS || got.PostedRevision != 1 {
		t.Fatalf("after Set = %+v, %v, %v", got, ok, err)
	}
	if after, err := m.Get(ctx, p.ID); err != nil || after.Revision != p.Revision {
		t.Fatalf("the proposal changed: revision %d (was %d), %v", after.Revision, p.Revision, err)
	}
	if err := NewPosts(repo, m, nil, nil).Set(ctx, "p-0000000000", post); precept.ErrorCode(err) != precept.NotFound {
		t.Fatalf("Set of an unknown proposal: %v", err)
	}
	if h, _ := m.History(ctx, p.ID); len(h) != 1 {
		t.Fatalf("the Slack record entered the proposal's history: %+v", h)
	}
}
