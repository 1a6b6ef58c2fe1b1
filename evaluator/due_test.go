package evaluator

import (
	"slices"
	"testing"
	"time"

	"github.com/precept-dev/precept/lesson"
)

// A periodic pass takes a group that only gained members once it grew by
// a tenth since its last pass; a group queued for another reason, one
// never passed and Recluster take it at once.
func TestAPeriodicPassWaitsForAGroupToGrowATenth(t *testing.T) {
	g := newGroups(lesson.DefaultTaxonomy())
	cluster := func(id, agent string, size int) {
		cl := newCluster(id, time.Unix(0, 0))
		cl.Agent, cl.Category, cl.Size = agent, "tests-missing", size
		g.put(cl)
	}
	cluster("c-big", "coder", 1000)
	cluster("c-small", "writer", 5)
	big, small := g.keyOf("coder", "tests-missing"), g.keyOf("writer", "tests-missing")
	g.passedWith(big, 1000)
	g.passedWith(small, 5)

	// 99 more members: under a tenth.
	cluster("c-big", "coder", 1099)
	g.markGrown(big)
	if due := g.takeDue(); len(due) != 0 {
		t.Fatalf("due after 99 of 1,000 more: %v", due)
	}
	// The small group: any growth is due.
	cluster("c-small", "writer", 6)
	g.markGrown(small)
	if due := g.takeDue(); !slices.Equal(due, []string{small}) {
		t.Fatalf("due after one more of 5: %v", due)
	}
	// The hundredth: due.
	cluster("c-big", "coder", 1100)
	if due := g.takeDue(); !slices.Equal(due, []string{big}) {
		t.Fatalf("due after 100 of 1,000 more: %v", due)
	}
	g.passedWith(big, 1100)
	// A correction's mark is due at once; growth is not.
	cluster("c-big", "coder", 1101)
	g.markGrown(big)
	if due := g.takeDue(); len(due) != 0 {
		t.Fatalf("due after one of 1,100 more: %v", due)
	}
	g.markDirty(big)
	if due := g.takeDue(); !slices.Equal(due, []string{big}) {
		t.Fatalf("a group marked dirty: due %v", due)
	}
	// Recluster takes what has grown at all.
	cluster("c-big", "coder", 1102)
	g.markGrown(big)
	if all := g.takeDirty(); !slices.Equal(all, []string{big}) {
		t.Fatalf("Recluster takes %v", all)
	}
	if due := g.takeDue(); len(due) != 0 {
		t.Fatalf("still queued after Recluster: %v", due)
	}
	// A group never passed is due at its first growth.
	cluster("c-new", "planner", 3000)
	fresh := g.keyOf("planner", "tests-missing")
	g.markGrown(fresh)
	if due := g.takeDue(); !slices.Equal(due, []string{fresh}) {
		t.Fatalf("a group never passed: due %v", due)
	}
}
