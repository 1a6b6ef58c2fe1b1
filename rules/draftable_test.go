package rules

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// listingSource is a fakeSource that lists its clusters, as the
// evaluator does, and records whose evidence the proposer read.
type listingSource struct {
	*fakeSource
	read [][]string
}

func (l *listingSource) GeneralizableClusters(context.Context) ([]rulefmt.ClusterRef, bool, error) {
	evs, err := l.Generalizable(context.Background())
	var refs []rulefmt.ClusterRef
	for _, ev := range evs {
		refs = append(refs, rulefmt.ClusterRef{ID: ev.ClusterID, Class: string(ev.Class), Size: ev.Size})
	}
	return refs, true, err
}

func (l *listingSource) EvidenceOf(ctx context.Context, ids []string) ([]rulefmt.Evidence, error) {
	l.read = append(l.read, slices.Clone(ids))
	evs, err := l.Generalizable(ctx)
	return slices.DeleteFunc(evs, func(ev rulefmt.Evidence) bool { return !slices.Contains(ids, ev.ClusterID) }), err
}

// A proposer that lists clusters first reads the evidence of only those
// it may draft, and drafts, defers, blocks and leaves alone exactly what
// one reading every cluster's evidence does: through a rate cap, a
// blocked draft that grows, a window that opens and a rejection.
func TestListedClustersDraftAsEveryClusterRead(t *testing.T) {
	plain := newFixture(t, Options{})
	src := &listingSource{fakeSource: &fakeSource{}}
	listed := newFixture(t, Options{Evidence: src})
	listed.src = src.fakeSource
	lowSignal := []string{"Make it so that it is not like this at all, ok?", "it is not it", "no no no"}
	evs := append(rateCapClusters(), cluster("c-6", "docs-agent", lowSignal...))
	type outcome struct{ id, status string }
	round := func(step string, evs ...rulefmt.Evidence) []string {
		t.Helper()
		src.read = nil
		var got [2][]outcome
		for i, f := range []*fixture{plain, listed} {
			for _, p := range f.propose(evs...) {
				got[i] = append(got[i], outcome{p.ID, string(p.Status)})
			}
		}
		if !slices.Equal(got[0], got[1]) {
			t.Fatalf("%s: reading every cluster gave %v, listing first %v", step, got[0], got[1])
		}
		if len(src.read) > 1 {
			t.Fatalf("%s: %d reads of evidence in one round", step, len(src.read))
		}
		if len(src.read) == 0 {
			return nil
		}
		return src.read[0]
	}
	if read := round("first", evs...); len(read) != 6 {
		t.Fatalf("first round read %v, want all six clusters", read)
	}
	// Three proposals are open, one draft is deferred by the rate cap
	// and one blocked: nothing is read.
	if read := round("again", evs...); len(read) != 0 {
		t.Fatalf("second round read %v", read)
	}
	// The blocked cluster grows: its evidence is read, nothing else.
	grown := cluster("c-6", "docs-agent", append(lowSignal, "not like this")...)
	evs[5] = grown
	if read := round("grown", evs...); !slices.Equal(read, []string{"c-6"}) {
		t.Fatalf("after the blocked cluster grew, read %v", read)
	}
	// The window opens: the deferred draft is read and proposed.
	for _, f := range []*fixture{plain, listed} {
		f.clock.Advance(8*time.Hour + time.Second)
	}
	if read := round("window", evs...); len(read) != 1 {
		t.Fatalf("after the window, read %v", read)
	}
	// A rejected proposal's cluster is drafted again as its next
	// generation.
	for _, f := range []*fixture{plain, listed} {
		if _, err := f.m.Reject(context.Background(), RejectRequest{ProposalID: draftID("c-1", 0), By: "alice", Reason: "not now", Via: rulefmt.ViaAPI}); err != nil {
			t.Fatal(err)
		}
	}
	if read := round("rejected", evs...); !slices.Contains(read, "c-1") {
		t.Fatalf("after a rejection, read %v", read)
	}
}
