package evaluator

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Evidence reads every generalizable cluster with its members in one
// pass, and says of each what reading the clusters one by one says:
// members, central comments, reviewers, tags in lower case, the lesson
// from the taxonomy and what reviewers asked, the most central first.
func TestEvidenceReadsEveryGeneralizableClusterInOnePass(t *testing.T) {
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{})
	tagged := func(f precept.Feedback, tags ...string) precept.Feedback {
		f.Decision.Tags = tags
		return f
	}
	feed.add(tagged(neg("a", "alice", "E1", "Hardcoded API key in config.go; load secrets from the environment."), "Security"),
		tagged(neg("b", "bob", "E2", "API key is hardcoded in the config file, read it from an env var instead."), "Security"),
		tagged(neg("c", "carol", "E3", "Do not hardcode the API key; use environment variables for secrets."), "Security"),
		neg("d", "dave", "E4", "The retry loop has no timeout and hangs forever; set a timeout on the HTTP client."),
		neg("e", "erin", "E5", "No timeout on the HTTP client: the retry loop hangs forever, add a timeout."),
		neg("f", "frank", "E6", "Set a timeout on the HTTP client, the retry loop can hang forever without one."))
	e.drain(t)
	ctx := context.Background()
	gen, err := e.svc.Generalizable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := e.svc.Evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gen) < 2 || len(evs) != len(gen) {
		t.Fatalf("Evidence = %d clusters, Generalizable = %d; the test wants two or more", len(evs), len(gen))
	}
	taxonomy := e.svc.opts.Lessons.Classifier().Taxonomy()
	for i, ev := range evs {
		v, err := e.svc.Cluster(ctx, gen[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		var ids, lower []string
		for _, m := range v.Members {
			ids = append(ids, m.DecisionID)
		}
		for _, tag := range v.Tags {
			lower = append(lower, strings.ToLower(tag))
		}
		if ev.ClusterID != v.ID || ev.Class != string(v.Class) || ev.Size != v.Size || ev.Confidence != v.Confidence ||
			!slices.Equal(ev.FeedbackIDs, ids) || !slices.EqualFunc(ev.Comments, v.Representatives, func(c rulefmt.Comment, r Representative) bool { return c == rulefmt.Comment(r) }) ||
			!slices.Equal(ev.Reviewers, slices.Sorted(maps.Keys(v.Reviewers))) || !slices.Equal(ev.Epics, slices.Sorted(maps.Keys(v.Epics))) ||
			!slices.Equal(ev.Agents, v.Stats.Agents) || !slices.Equal(ev.Tags, lower) {
			t.Fatalf("evidence %+v\ndiffers from cluster %+v", ev, v)
		}
		cat, ok := taxonomy.Category(v.Category)
		if !ok || ev.Category != cat.ID || ev.CategoryRule != cat.Rule || ev.Protected != cat.Protected {
			t.Fatalf("evidence of %s has category %q (rule %q), want the taxonomy's %+v", v.ID, ev.Category, ev.CategoryRule, cat)
		}
		var asked []string
		for _, m := range v.Members {
			if m.Asked != "" {
				asked = append(asked, m.Asked)
			}
		}
		if len(ev.Asked) != len(asked) || len(asked) == 0 {
			t.Fatalf("evidence of %s asked %q, members asked %q", v.ID, ev.Asked, asked)
		}
		central := v.Members[slices.IndexFunc(v.Members, func(m Member) bool { return m.DecisionID == v.Representatives[0].DecisionID })]
		if central.Asked != "" && ev.Asked[0] != central.Asked {
			t.Fatalf("evidence of %s asked %q first, the most central member asked %q", v.ID, ev.Asked[0], central.Asked)
		}
		if strings.Join(ev.Tags, ",") != strings.ToLower(strings.Join(ev.Tags, ",")) {
			t.Fatalf("tags %q are not lower-case", ev.Tags)
		}
	}
	// Once the clusters' comments are ranked, reading the evidence again
	// is one read transaction however many clusters there are.
	before := e.svc.state.db.Stats()
	if _, err := e.svc.Evidence(ctx); err != nil {
		t.Fatal(err)
	}
	if reads := e.svc.state.db.Stats().TxN - before.TxN; reads != 1 {
		t.Fatalf("Evidence of %d clusters took %d read transactions, want 1", len(evs), reads)
	}
	// One cluster's evidence, read alone, is what Evidence says of it.
	for _, ev := range evs {
		got, err := e.svc.Evidence(ctx, ev.ClusterID)
		ok := len(got) == 1
		var one rulefmt.Evidence
		if ok {
			one = got[0]
		}
		if err != nil || !ok || !reflect.DeepEqual(one, ev) {
			t.Fatalf("Evidence(%s) = %+v, %v, %v; want %+v", ev.ClusterID, one, ok, err, ev)
		}
	}
	if got, err := e.svc.Evidence(ctx, "no-such-cluster"); len(got) != 0 || err != nil {
		t.Fatalf("Evidence of an unknown cluster = %v, %v; want none, nil", got, err)
	}
}

// Evidence is made again only for clusters written since the last read:
// a second read ranks nothing, a member joining one cluster re-reads
// that one alone and shows the new member, what a caller does to the slices
// it got does not reach the next caller, and a deleted cluster leaves.
func TestEvidenceIsMadeAgainOnlyForChangedClusters(t *testing.T) {
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{})
	feed.add(neg("a", "alice", "E1", "Hardcoded API key in config.go; load secrets from the environment."),
		neg("b", "bob", "E2", "API key is hardcoded in the config file, read it from an env var instead."),
		neg("c", "carol", "E3", "Do not hardcode the API key; use environment variables for secrets."),
		neg("d", "dave", "E4", "The retry loop has no timeout and hangs forever; set a timeout on the HTTP client."),
		neg("e", "erin", "E5", "No timeout on the HTTP client: the retry loop hangs forever, add a timeout."),
		neg("f", "frank", "E6", "Set a timeout on the HTTP client, the retry loop can hang forever without one."))
	e.drain(t)
	ctx := context.Background()
	// changed is how many clusters the next Evidence reads again.
	changed := func() int {
		t.Helper()
		c := &e.svc.state.changes
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.all {
			return -1
		}
		return len(c.ids)
	}
	first, err := e.svc.Evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) < 2 {
		t.Fatalf("%d generalizable clusters; the test wants two", len(first))
	}
	if n := changed(); n != 0 {
		t.Errorf("after a read, %d clusters count as changed, want 0", n)
	}
	first[0].FeedbackIDs[0], first[0].Comments = "scribbled", nil
	again, err := e.svc.Evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].FeedbackIDs[0] == "scribbled" || len(again[0].Comments) == 0 {
		t.Errorf("a caller's change to its evidence reached the next caller: %+v", again[0])
	}
	feed.add(neg("g", "grace", "E7", "The HTTP client has no timeout, so the retry loop hangs forever; add one."))
	e.drain(t)
	if n := changed(); n != 1 {
		t.Errorf("after one decision joined a cluster, %d clusters count as changed, want 1", n)
	}
	after, err := e.svc.Evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var grew bool
	for _, ev := range after {
		if slices.Contains(ev.FeedbackIDs, "g") {
			grew = ev.Size == 4 && len(ev.FeedbackIDs) == 4
		}
	}
	if !grew {
		t.Errorf("the cluster decision g joined is not shown with it: %+v", after)
	}
	gone := after[0].ClusterID
	if err := e.svc.state.apply(commit{dropClusters: []string{gone}}); err != nil {
		t.Fatal(err)
	}
	if n := changed(); n != 1 {
		t.Errorf("after a cluster was dropped, %d clusters count as changed, want 1", n)
	}
	final, err := e.svc.Evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(final, func(ev rulefmt.Evidence) bool { return ev.ClusterID == gone }) || len(final) != len(after)-1 {
		t.Errorf("cluster %s was dropped and still has evidence: %d of %d", gone, len(final), len(after))
	}
}

// Written clusters nobody takes (proposing off) are listed up to
// maxNoted, then count as all, and a take starts the list again.
func TestWrittenClustersNobodyTakesStayBounded(t *testing.T) {
	var c clusterChanges
	for i := range maxNoted + 10 {
		c.note(commit{clusters: []*Cluster{{ID: fmt.Sprint("c", i)}}})
	}
	c.mu.Lock()
	listed, all := len(c.ids), c.all
	c.mu.Unlock()
	if !all || listed != 0 {
		t.Fatalf("after %d written clusters: %d listed, all %v; want none listed, all", maxNoted+10, listed, all)
	}
	if ids, all := c.take(); len(ids) != 0 || !all {
		t.Errorf("take = %d ids, all %v; want all", len(ids), all)
	}
	c.note(commit{dropClusters: []string{"x"}, removeMembers: [][2]string{{"y", "d"}}, members: []memberRecord{{ClusterID: "z", Seq: 4}, {ClusterID: "x", Seq: 1}}})
	if ids, all := c.take(); all || !maps.Equal(ids, map[string]bool{"x": true, "y": true, "z": false}) {
		t.Errorf("after a take, a drop, a removal and members added: %v, all %v; want x and y read whole, z grown", ids, all)
	}
}

// A cluster that only gained members is read from its new members and
// its comment sample, and its evidence is exactly what reading all its
// members makes: checked after every batch of a stream of decisions
// that grows clusters past the sample, with a re-clustering pass and a
// dropped cluster on the way.
func TestEvidenceOfGrownClustersEqualsAWholeRead(t *testing.T) {
	defer func(n int) { centralitySample = n }(centralitySample)
	centralitySample = 6 // clusters outgrow it
	items := loadFixture(t, "labelled.jsonl")
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{})
	ctx := context.Background()
	largest := 0
	check := func(step string) int {
		t.Helper()
		cached, err := e.svc.Evidence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ev := range cached {
			ids = append(ids, ev.ClusterID)
		}
		// Ranked afresh, not from the views the cached read ranked.
		e.svc.views.mu.Lock()
		e.svc.views.m = nil
		e.svc.views.mu.Unlock()
		whole := wholeEvidence(t, e.svc, ids)
		if len(whole) != len(cached) {
			t.Fatalf("%s: %d clusters from the cache, %d read whole", step, len(cached), len(whole))
		}
		for i := range whole {
			largest = max(largest, whole[i].Size)
			if !reflect.DeepEqual(cached[i], whole[i]) {
				t.Fatalf("%s: cluster %s:\ncached %+v\n whole %+v", step, whole[i].ClusterID, cached[i], whole[i])
			}
		}
		return len(cached)
	}
	feedThrice(t, e, feed, items, 40, func(step string) { check(step) })
	e.drain(t)
	if n := check("at the end"); n < 5 {
		t.Fatalf("only %d generalizable clusters", n)
	}
	e.svc.evidence.mu.Lock()
	grown := e.svc.evidence.grown
	e.svc.evidence.mu.Unlock()
	if grown < 20 || largest < 4*centralitySample {
		t.Fatalf("%d clusters were read from their new members, the largest has %d: the path is not exercised", grown, largest)
	}
	t.Logf("%d reads of grown clusters; the largest has %d members", grown, largest)
	ev, err := e.svc.Evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.state.apply(commit{dropClusters: []string{ev[0].ClusterID}}); err != nil {
		t.Fatal(err)
	}
	check("after a drop")
}

// wholeEvidence is the evidence of those of ids that are generalizable,
// each read with all its members in one read transaction, past the
// cache: what the cache must equal.
func wholeEvidence(t *testing.T, s *Service, ids []string) []rulefmt.Evidence {
	t.Helper()
	var read []clusterMembers
	err := s.state.db.View(func(tx *bolt.Tx) error {
		var err error
		read, err = generalizableAmong(tx, slices.Sorted(slices.Values(ids)), false, centralitySample)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []rulefmt.Evidence
	for _, r := range read {
		ev, err := s.evidenceFrom(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// The proposer lists the generalizable clusters, then asks for the
// evidence of some of them. Whatever it asked for before, what it gets
// is the whole read's; and the listing names exactly the generalizable
// clusters, each with a size its evidence's support does not exceed.
func TestEvidenceOfSomeClustersEqualsAWholeRead(t *testing.T) {
	defer func(n int) { centralitySample = n }(centralitySample)
	centralitySample = 6
	items := loadFixture(t, "labelled.jsonl")
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{})
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(7, 22))
	asked := 0
	check := func(step string) {
		t.Helper()
		refs := GeneralizableClusters(e.svc)
		var all []string
		for _, r := range refs {
			all = append(all, r.ID)
		}
		whole := wholeEvidence(t, e.svc, all)
		if len(whole) != len(refs) {
			t.Fatalf("%s: the listing names %d clusters, %d are generalizable", step, len(refs), len(whole))
		}
		for i, ev := range whole {
			if ev.ClusterID != refs[i].ID || ev.Support() > refs[i].Size || string(ev.Class) != refs[i].Class {
				t.Fatalf("%s: listed %+v, read %s of class %s with support %d", step, refs[i], ev.ClusterID, ev.Class, ev.Support())
			}
		}
		// A few clusters, some asked for before and some not, and once
		// in a while all of them.
		var some []string
		for _, id := range all {
			if rnd.IntN(3) == 0 {
				some = append(some, id)
			}
		}
		if rnd.IntN(4) == 0 {
			some = nil
		}
		got, err := e.svc.Evidence(ctx, some...)
		if err != nil {
			t.Fatal(err)
		}
		if some == nil {
			some = all
		}
		want := wholeEvidence(t, e.svc, some)
		asked += len(want)
		if len(got) != len(want) {
			var g, w []string
			for _, x := range got {
				g = append(g, x.ClusterID)
			}
			for _, x := range want {
				w = append(w, x.ClusterID)
			}
			t.Fatalf("%s: evidence of %d clusters, %d read whole\n%v\n%v\nasked %v", step, len(got), len(want), g, w, some)
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("%s: cluster %s:\n got %+v\nwhole %+v", step, want[i].ClusterID, got[i], want[i])
			}
		}
	}
	feedThrice(t, e, feed, items, 25, check)
	if asked < 50 {
		t.Fatalf("only %d clusters' evidence compared", asked)
	}
}

// feedThrice feeds the fixture three times over, under new ids and
// reviewers, so clusters outgrow the comment sample; it checks after
// every items evaluated and after a re-clustering in the second round.
func feedThrice(t *testing.T, e *env, feed *memFeed, items []labelled, every int, check func(step string)) {
	t.Helper()
	for round := range 3 {
		for i, it := range items {
			f := it.Feedback
			f.Decision.DecisionID = fmt.Sprintf("%s-%d", f.Decision.DecisionID, round)
			f.Decision.ReviewerID = fmt.Sprintf("%s-%d", f.Decision.ReviewerID, round)
			feed.add(f)
			if (i+1)%every == 0 {
				e.drain(t)
				check(fmt.Sprintf("round %d, item %d", round, i))
			}
		}
		if round == 1 {
			if _, err := e.svc.Recluster(context.Background()); err != nil {
				t.Fatal(err)
			}
			check("after re-clustering")
		}
	}
}
