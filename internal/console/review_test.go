package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

var nextLink = regexp.MustCompile(`<a href="([^"]+)" rel="next">`)

// next follows a page's "Next page" link.
func (v *visitor) next(body string) (int, string) {
	v.t.Helper()
	m := nextLink.FindStringSubmatch(body)
	if m == nil {
		v.t.Fatalf("the page has no next-page link:\n%s", body)
	}
	return v.get(strings.ReplaceAll(m[1], "&amp;", "&"))
}

func TestNeedsReviewListsAmbiguousDecisionsPageByPage(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xadd(t,
		event("vague-1", "reviewer_id", "vic", "reviewer_comment", "fix this"),
		event("vague-2", "reviewer_id", "vic", "reviewer_comment", "wrong <b>again</b>"),
	)
	ev := preceptv1connect.NewEvaluatorServiceClient(&http.Client{Transport: bearer{ritaToken}}, s.url)
	eventually(t, "two decisions to need review", 30*time.Second, func() bool {
		resp, err := ev.ListNeedsReview(context.Background(), connect.NewRequest(&preceptv1.ListNeedsReviewRequest{}))
		return err == nil && len(resp.Msg.GetItems()) == 2
	})
	rita := s.signIn(t, ritaToken)
	status, body := rita.get("/ui/review")
	if status != http.StatusOK {
		t.Fatalf("needs review: %d\n%s", status, body)
	}
	mustContain(t, body, "<strong>2</strong> waiting.", "vague-1", "vague-2", "vic", "<blockquote>fix this</blockquote>", "wrong &lt;b&gt;again&lt;/b&gt;",
		`data-label="Missing">`, `data-live="clusters"`)
	if strings.Contains(body, "<b>again") {
		t.Error("a reviewer's comment reached the page unescaped")
	}
	if status, body := rita.get("/ui/review?agent=docs-agent"); status != http.StatusOK || strings.Contains(body, "vague-1") {
		t.Fatalf("the agent filter let another agent's decision through: %d", status)
	}

	// One a page: the next-page link leads to the other decision, and
	// the last page has no next link.
	status, first := rita.get("/ui/review?size=1&agent=coding-agent")
	if status != http.StatusOK || strings.Count(first, `data-label="Decision"`) != 1 {
		t.Fatalf("first page of one: %d\n%s", status, first)
	}
	status, second := rita.next(first)
	if status != http.StatusOK || strings.Count(second, `data-label="Decision"`) != 1 {
		t.Fatalf("second page: %d\n%s", status, second)
	}
	for _, id := range []string{"vague-1", "vague-2"} {
		if strings.Contains(first, id) == strings.Contains(second, id) {
			t.Errorf("%s is on both pages or on neither", id)
		}
	}
	mustContain(t, second, `href="/ui/review?agent=coding-agent&amp;size=1">First page</a>`, "<strong>2</strong> waiting for coding-agent.")
	if nextLink.MatchString(second) {
		t.Error("the last page links to a next one")
	}
}

func TestDeadLettersShowReasonsAndHostileBytesSafely(t *testing.T) {
	s := startServer(t, tokensYAML)
	hostile := "<script>alert(1)</script>\x1b[2J\u202eevil"
	entries := []map[string]any{
		{"data": "{not json " + hostile},
		{"data": "{also not json", "blob": "\xff\xfe\x00binary"},
		{"data": "{" + strings.Repeat("A", 3000)},
	}
	for _, e := range entries {
		if err := s.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: s.app.Config.Redis.Stream, Values: e}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	fc := preceptv1connect.NewFeedbackServiceClient(&http.Client{Transport: bearer{ritaToken}}, s.url)
	eventually(t, "three dead letters", 30*time.Second, func() bool {
		resp, err := fc.ListDeadLetters(context.Background(), connect.NewRequest(&preceptv1.ListDeadLettersRequest{}))
		return err == nil && resp.Msg.GetTotal() == 3
	})
	rita := s.signIn(t, ritaToken)
	status, body := rita.get("/ui/deadletters")
	if status != http.StatusOK {
		t.Fatalf("dead letters: %d\n%s", status, body)
	}
	mustContain(t, body, "3 stream entries", "invalid JSON", "&lt;script&gt;alert(1)&lt;/script&gt;", `\u{1B}[2J`, `\u{202E}evil`,
		`<span class="badge">hex</span> fffe0062696e617279`, "… 1977 bytes more", "whole: every field byte for byte", `data-live="clusters"`)
	for _, bad := range []string{"<script>alert", "\x1b", "\u202e", "\xff"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page carries %q raw", bad)
		}
	}

	// Two a page: the next page holds the third.
	status, first := rita.get("/ui/deadletters?size=2")
	if status != http.StatusOK || strings.Count(first, `<article class="card"`) != 2 {
		t.Fatalf("first page of two: %d\n%s", status, first)
	}
	status, second := rita.next(first)
	if status != http.StatusOK || strings.Count(second, `<article class="card"`) != 1 || nextLink.MatchString(second) {
		t.Fatalf("second page: %d\n%s", status, second)
	}
	if status, _ := rita.get("/ui/deadletters?page=forged"); status != http.StatusBadRequest {
		t.Fatalf("a forged page token: %d", status)
	}

	// Replay and drop are for admins, behind a confirmation page.
	list, err := fc.ListDeadLetters(context.Background(), connect.NewRequest(&preceptv1.ListDeadLettersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	newest, oldest := list.Msg.GetDeadLetters()[0].GetId(), list.Msg.GetDeadLetters()[2].GetId()
	if strings.Contains(body, "/ui/deadletters/confirm") {
		t.Error("a reader sees the replay and drop buttons")
	}
	if status, _ := rita.get("/ui/deadletters/confirm?action=drop&id=" + newest); status != http.StatusForbidden {
		t.Fatalf("a reader's confirmation page: %d", status)
	}
	if status, _ := rita.post("/ui/deadletters/drop", url.Values{"id": {newest}}); status != http.StatusForbidden {
		t.Fatalf("a reader's drop: %d", status)
	}
	root := s.signIn(t, rootToken)
	_, body = root.get("/ui/deadletters")
	mustContain(t, body, `name="action" value="replay"`, `name="action" value="drop"`)
	status, body = root.get("/ui/deadletters/confirm?action=drop&id=" + newest)
	if status != http.StatusOK {
		t.Fatalf("confirmation page: %d\n%s", status, body)
	}
	mustContain(t, body, "Drop dead letter", `action="/ui/deadletters/drop"`, `name="id" value="`+newest+`"`, "for good")
	if status, _ := root.post("/ui/deadletters/drop", url.Values{"id": {newest}, "csrf": {"forged"}}); status != http.StatusForbidden {
		t.Fatalf("a drop without the CSRF token: %d", status)
	}
	if status, loc := root.post("/ui/deadletters/drop", url.Values{"id": {newest}}); status != http.StatusSeeOther || loc != "/ui/deadletters?done=dropped" {
		t.Fatalf("drop: %d %q", status, loc)
	}
	_, body = root.get("/ui/deadletters?done=dropped")
	mustContain(t, body, "The dead letter was dropped.", "2 stream entries")
	if strings.Contains(body, newest) {
		t.Error("the dropped dead letter is still listed")
	}
	status, body = root.post("/ui/deadletters/drop", url.Values{"id": {newest}})
	if status != http.StatusConflict {
		t.Fatalf("dropping it again: %d", status)
	}
	mustContain(t, body, "does not exist")
	if status, loc := root.post("/ui/deadletters/replay", url.Values{"id": {oldest}}); status != http.StatusSeeOther || loc != "/ui/deadletters?done=replayed" {
		t.Fatalf("replay: %d %q", status, loc)
	}
	if status, _ := root.post("/ui/deadletters/rename", url.Values{"id": {oldest}}); status != http.StatusNotFound {
		t.Fatalf("an unknown action: %d", status)
	}
}
