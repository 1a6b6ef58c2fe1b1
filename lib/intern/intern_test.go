package intern

import "testing"

func TestNumbersAreStableAndEmptyIsZero(t *testing.T) {
	var tb Table
	if tb.Of("") != 0 || tb.Len() != 1 || tb.Strings()[0] != "" {
		t.Fatalf("empty table: Of(\"\")=%d Len=%d", tb.Of(""), tb.Len())
	}
	a, b := tb.Of("agent-a"), tb.Of("agent-b")
	if a != 1 || b != 2 || tb.Of("agent-a") != a {
		t.Fatalf("numbers %d %d, again %d", a, b, tb.Of("agent-a"))
	}
	if n, ok := tb.Lookup("agent-b"); !ok || n != b {
		t.Fatalf("Lookup(agent-b) = %d, %v", n, ok)
	}
	if _, ok := tb.Lookup("agent-z"); ok || tb.Len() != 3 {
		t.Fatalf("Lookup of an unknown string numbered it: Len = %d", tb.Len())
	}
	seen := tb.Strings()
	tb.Of("agent-c")
	if len(seen) != 3 || seen[a] != "agent-a" || seen[b] != "agent-b" {
		t.Fatalf("a view taken before numbering more changed: %q", seen)
	}
	if got := tb.Strings(); len(got) != 4 || got[3] != "agent-c" || tb.Len() != 4 {
		t.Fatalf("Strings = %q, Len = %d", got, tb.Len())
	}
}
