package evaluator

import (
	"context"
	"slices"
	"testing"
)

// TestInternalHostsAndSecretsInDocsMakeOneProposal is issue 22's named
// check: three comments by two reviewers in two epics, in different words,
// all saying internal hostnames and secrets must not be in documentation,
// are one lesson (secrets-exposed), one generalizable cluster and so one
// rule proposal, however each is phrased.
func TestInternalHostsAndSecretsInDocsMakeOneProposal(t *testing.T) {
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{})
	var changes []Change
	e.svc.opts.OnChange = func(c Change) { changes = append(changes, c) }
	ids := []string{"hosts-readme", "url-docs", "token-example"}
	feed.add(
		neg(ids[0], "rhea", "E-portal", "The README now lists the names of our internal build hosts (ci-03.corp.lan and friends). This repo is public, please take them out."),
		neg(ids[1], "rhea", "E-billing", "the setup guide points readers at an intranet URL, wiki.office.internal/payments. outsiders can't open it and it shows our network layout; keep internal addresses out of the docs"),
		neg(ids[2], "tomas", "E-billing", "In the docs example for the client you pasted what looks like a live access token. Use a placeholder like <YOUR_TOKEN> there and revoke that one."),
	)
	e.drain(t)
	if _, err := e.svc.Recluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range ids {
		ev, _, err := e.svc.Evaluation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		cat := ""
		if ev.Lesson != nil {
			cat = ev.Lesson.Category
		}
		t.Logf("%s: %s %s cluster %s", id, ev.Class, cat, ev.ClusterID)
	}
	evs, err := e.svc.Evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d generalizable clusters, want one proposal: %+v", len(evs), evs)
	}
	got := evs[0]
	slices.Sort(got.FeedbackIDs)
	want := slices.Sorted(slices.Values(ids))
	if got.Category != "secrets-exposed" || !slices.Equal(got.FeedbackIDs, want) || got.Class != string(GeneralizableHigh) {
		t.Fatalf("evidence = %s %s %v, want GENERALIZABLE_HIGH secrets-exposed %v", got.Class, got.Category, got.FeedbackIDs, want)
	}
	if len(changes) == 0 || !slices.Contains(changes[len(changes)-1].GeneralizableClusters, got.ClusterID) {
		t.Fatalf("no change announced cluster %s to the rule proposer: %+v", got.ClusterID, changes)
	}
}
