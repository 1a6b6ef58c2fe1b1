package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Written in review (ui-review2): odd query values on the pages other
// helpers built answer 4xx, never 5xx; readers cannot reach admin or
// approver actions.
func TestOddInputsAreClientErrors(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xadd(t, clusterEvents()...)
	rita := s.signIn(t, ritaToken)
	for _, path := range []string{
		"/ui/clusters?size=0", "/ui/clusters?size=101", "/ui/clusters?size=99999999999999999999", "/ui/clusters?page=-5",
		"/ui/clusters?page=zzz", "/ui/clusters?order=growth&page=0", "/ui/clusters?order=growth&page=99999999999999999999",
		"/ui/clusters?order=growth&page=-1", "/ui/clusters?order=bogus", "/ui/clusters/nope", "/ui/clusters/%ff",
		"/ui/clusters/nope?members=-1", "/ui/clusters/nope?members=1e9", "/ui/clusters/nope?members=99999999999",
		"/ui/review?page=zzz", "/ui/review?size=-1", "/ui/review?agent=%ff",
		"/ui/deadletters?page=zzz", "/ui/deadletters?page=-1", "/ui/deadletters?size=1000",
		"/ui/analytics?from=2026-13-01", "/ui/analytics?from=0001-01-01&to=9999-12-31", "/ui/analytics?to=9999-12-31",
		"/ui/analytics?from=2020-01-02&to=2020-01-01", "/ui/analytics?by=year", "/ui/analytics?split=reviewer",
		"/ui/analytics?from=1999-12-31&to=2000-01-02", "/ui/analytics?agent=" + strings.Repeat("a", 500),
		"/ui/analytics/acceptance?format=exe", "/ui/analytics/nope?format=svg", "/ui/analytics/acceptance",
		"/ui/prompts?from=v1:x", "/ui/prompts?from=v1:x&to=v1:y", "/ui/prompts?from=" + strings.Repeat("v", 200) + "&to=x",
		"/ui/prompts?agent=a&stage=b&xpage=-1", "/ui/prompts?agent=a&stage=b&vpage=99999999999999999999",
		"/ui/prompts?agent=../../etc&stage=..%2f..", "/ui/prompts?agent=%ff&stage=x",
		"/ui/deadletters/confirm?id=x&action=replay",
	} {
		status, body := rita.get(path)
		msg := body[max(0, strings.Index(body, `class="error"`)):]
		t.Logf("GET %s: %d %.160s", path, status, strings.ReplaceAll(msg, "\n", " "))
		if status >= 500 {
			t.Errorf("GET %s: %d", path, status)
		}
	}
	// A reader posting the dead-letter and correction forms with a valid
	// CSRF token is refused.
	rita.get("/ui/deadletters")
	for _, path := range []string{"/ui/deadletters/replay", "/ui/deadletters/drop", "/ui/clusters/correct"} {
		status, _ := rita.post(path, url.Values{"id": {"1-0"}, "kind": {"not_a_pattern"}, "cluster": {"c"}})
		if status != http.StatusForbidden {
			t.Errorf("POST %s as a reader: %d, want 403", path, status)
		}
	}
}

// Written in review (ui-review2): pressing Enter in a text field of the
// members form submits it with its first submit button (HTML "implicit
// submission"). A curator who types the cluster to move decisions to and
// presses Enter must not split them out instead; the first submit
// button of that form must be the move (or a harmless default).
func TestEnterInTheMoveFieldDoesNotSplit(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xadd(t, clusterEvents()...)
	cl := s.firstCluster(t, 2)
	alice := s.signIn(t, aliceToken)
	status, body := alice.get("/ui/clusters/" + cl.GetId())
	if status != http.StatusOK {
		t.Fatalf("cluster page: %d", status)
	}
	i := strings.Index(body, `id="move-to"`)
	if i < 0 {
		t.Fatal("no move-to field")
	}
	// The form holding move-to is the one opened last before it.
	form := body[strings.LastIndex(body[:i], "<form"):]
	form = form[:strings.Index(form, "</form>")]
	// Enter in a field submits with the form's first submit button.
	first := form[strings.Index(form, `<button type="submit"`):]
	first = first[:strings.Index(first, ">")]
	if !strings.Contains(first, "disabled") {
		t.Errorf("Enter in the move-to field submits %s: a split, not a move", first)
	}
	// And a split with a target typed in is refused, not done.
	alice.get("/ui/clusters/" + cl.GetId())
	status, body = alice.post("/ui/clusters/correct", url.Values{"cluster": {cl.GetId()}, "kind": {"split"}, "decision": {"rule-d1"}, "other": {"c-elsewhere"}})
	if status != http.StatusBadRequest {
		t.Fatalf("split with a target cluster: %d\n%s", status, body)
	}
}
