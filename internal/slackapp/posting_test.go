package slackapp

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// evidence is a rulefmt.EvidenceSource the tests set.
type evidence struct {
	mu  sync.Mutex
	evs []rulefmt.Evidence
}

func (e *evidence) Generalizable(context.Context) ([]rulefmt.Evidence, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]rulefmt.Evidence(nil), e.evs...), nil
}

func testsCluster() rulefmt.Evidence {
	at := time.Date(2026, 11, 19, 9, 0, 0, 0, time.UTC)
	return rulefmt.Evidence{
		ClusterID: "c-tests", Class: rulefmt.ClassGeneralizableHigh, Confidence: 0.86, Agents: []string{"coding-agent"},
		FeedbackIDs: []string{"d1", "d2", "d3"}, Reviewers: []string{"ann", "ben", "cat"}, Epics: []string{"EPIC-1", "EPIC-2"},
		Comments: []rulefmt.Comment{
			{DecisionID: "d1", ReviewerID: "ann", Agent: "coding-agent", Text: "missing unit tests for the new retry helper", Centrality: 0.9},
			{DecisionID: "d2", ReviewerID: "ben", Agent: "coding-agent", Text: "the new retry helper is missing unit tests <!channel>", Centrality: 0.8},
			{DecisionID: "d3", ReviewerID: "cat", Agent: "coding-agent", Text: "unit tests are missing for the retry helper", Centrality: 0.7},
		},
		Size: 3, FirstSeen: at, LastSeen: at.Add(time.Hour),
	}
}

func TestDraftedProposalIsPostedWithItsEvidenceAndTheMessageIsRecorded(t *testing.T) {
	src := &evidence{evs: []rulefmt.Evidence{testsCluster()}}
	e := newEnv(t, envConfig{rules: rules.Options{Evidence: src}})
	drafted, err := e.rules.ProposeFromEvidence(context.Background())
	if err != nil || len(drafted) != 1 || drafted[0].Status != rulefmt.Pending {
		t.Fatalf("drafted = %+v, %v", drafted, err)
	}
	p := drafted[0]
	msg := e.posted(p.ID)
	for _, want := range []string{
		"Rule proposal for coding-agent · ", "*Rule* `" + p.ID + "`", "3 decisions", "*Reviewers*\n3 distinct", "*Epics*\n2 distinct",
		"“missing unit tests for the new retry helper” — ann", "Branch `proposal/" + p.ID + "`", "*Approvals:* 0/2 — none yet",
	} {
		if !msg.Shows(want) {
			t.Errorf("message lacks %q:\n%v", want, msg.Strings())
		}
	}
	if msg.Shows("<!channel>") {
		t.Error("a reviewer's comment mentions the channel")
	}
	if v, err := DecodeButtonValue(msg.Buttons()[ActionApprove]); err != nil || v.ProposalID != p.ID || v.Revision != p.Revision {
		t.Errorf("approve button = %+v, %v", v, err)
	}
	got := e.post(p.ID)
	if got == nil || !got.Posted || got.Channel != testChannel || got.TS != msg.TS || got.PostedRevision != p.Revision ||
		got.Attempts != 1 || got.LastError != "" || !strings.HasPrefix(got.Permalink, "https://fake.slack.test/archives/"+testChannel) {
		t.Fatalf("recorded post = %+v", got)
	}
	// The record is a commit on precept/slack that the git CLI reads; the
	// proposal's revision did not move.
	if out := testenv.Git(t, e.repo.Path(), "show", PostBranch+":slack/"+p.ID+".yaml"); !strings.Contains(out, "ts: \""+msg.TS+"\"") && !strings.Contains(out, "ts: "+msg.TS) {
		t.Fatalf("slack record in git:\n%s", out)
	}
	if e.get(p.ID).Revision != p.Revision {
		t.Fatal("recording the post changed the proposal's revision")
	}
}

func TestRestartUpdatesTheSameMessageAndNeverPostsTwice(t *testing.T) {
	first := newEnv(t, envConfig{})
	p := first.propose("Wrap every returned error with the operation that failed.")
	msg := first.posted(p.ID)
	first.stop()

	// A new process with nothing in memory (and an empty Store): the
	// proposal's record says where its message is.
	second := newEnv(t, envConfig{repo: first.repo, ws: first.ws})
	if _, err := second.rules.Approve(context.Background(), rules.ApproveRequest{ProposalID: p.ID, By: "bob", Via: rulefmt.ViaAPI}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message to show bob's approval", func() bool {
		m, _ := second.ws.Message(testChannel, msg.TS)
		return m.Shows("*Approvals:* 1/2 — bob")
	})
	time.Sleep(3 * second.opts.PostRetry) // several reconcile rounds
	if top := second.ws.TopLevel(testChannel); len(top) != 1 {
		t.Fatalf("%d messages in the channel, want 1", len(top))
	}
	if got := second.post(p.ID); got.TS != msg.TS || got.PostedRevision != second.get(p.ID).Revision {
		t.Fatalf("record after the update = %+v", got)
	}
}

func TestSlackOutageIsRetriedWithBackoffRecordedAndNeverBlocksProposals(t *testing.T) {
	e := newEnv(t, envConfig{})
	e.ws.FailStatus("chat.postMessage", http.StatusServiceUnavailable)
	start := time.Now()
	p := e.propose("Close every response body the HTTP client returns.")
	if time.Since(start) > 2*time.Second {
		t.Fatal("proposing waited for Slack")
	}
	eventually(t, "failed attempts to be recorded", func() bool {
		s := e.post(p.ID)
		return s != nil && !s.Posted && s.Attempts >= 3 && strings.Contains(s.LastError, "503")
	})
	e.ws.FailStatus("chat.postMessage", 0)
	msg := e.posted(p.ID)
	got := e.post(p.ID)
	if got.LastError != "" || got.Attempts < 4 || got.TS != msg.TS {
		t.Fatalf("after recovery = %+v", got)
	}
	if top := e.ws.TopLevel(testChannel); len(top) != 1 {
		t.Fatalf("%d messages, want 1", len(top))
	}
}

func TestBackoffDoublesFromASecondUpToPostRetryOrWhatSlackAsks(t *testing.T) {
	var p poster
	p.init()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		attempt   int
		slackWait time.Duration
		limit     time.Duration
		want      time.Duration
	}{
		{1, 0, time.Minute, time.Second},
		{2, 0, time.Minute, 2 * time.Second},
		{3, 0, time.Minute, 4 * time.Second},
		{6, 0, time.Minute, 32 * time.Second},
		{7, 0, time.Minute, time.Minute},
		{40, 0, time.Minute, time.Minute},
		{1, 0, 200 * time.Millisecond, 200 * time.Millisecond},
		{2, 90 * time.Second, time.Minute, 90 * time.Second},
	} {
		if got := p.failed("p-x", now, tc.attempt, tc.slackWait, tc.limit); got != tc.want {
			t.Errorf("attempt %d (slack %v, cap %v) waits %v, want %v", tc.attempt, tc.slackWait, tc.limit, got, tc.want)
		}
		if due, _ := p.nextDue(); !due.Equal(now.Add(tc.want)) {
			t.Errorf("due %v", due)
		}
	}
	if p.attempt("p-x") != 3 {
		t.Errorf("next attempt = %d", p.attempt("p-x"))
	}
}

func TestWithPostingOffNothingIsPostedUntilItIsTurnedOn(t *testing.T) {
	e := newEnv(t, envConfig{opts: Options{Features: &Features{Posting: false}}})
	p := e.propose("Prefer table-driven tests for input validation rules.")
	time.Sleep(5 * e.opts.PostRetry)
	if n := e.ws.Calls("chat.postMessage"); n != 0 {
		t.Fatalf("%d posts with posting off", n)
	}
	if e.post(p.ID) != nil {
		t.Fatal("a post was recorded with posting off")
	}
	e.svc.SetFeatures(Features{Posting: true})
	e.posted(p.ID)
}

func TestAMessageDeletedInSlackIsPostedAgainWhileTheProposalIsPending(t *testing.T) {
	e := newEnv(t, envConfig{})
	p := e.propose("Name goroutines' owners in a comment where they are started.")
	first := e.posted(p.ID)
	e.ws.Fail("chat.update", "message_not_found")
	if _, err := e.rules.Approve(context.Background(), rules.ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a second message", func() bool { return len(e.ws.TopLevel(testChannel)) == 2 })
	e.ws.Fail("chat.update", "")
	second := e.ws.TopLevel(testChannel)[1]
	if !second.Shows("*Approvals:* 1/2 — alice") {
		t.Fatalf("new message = %v", second.Strings())
	}
	eventually(t, "the record to point at the new message", func() bool {
		s := e.post(p.ID)
		return s != nil && s.TS == second.TS && s.TS != first.TS
	})
}

func TestAMergeInGitUpdatesTheMessage(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	testenv.Git(t, filepath.Dir(remote), "init", "-q", "--bare", "-b", "main", remote)
	e := newEnv(t, envConfig{rules: rules.Options{Remote: &rules.Remote{URL: remote, WebURL: "https://git.example.com/org/rules"}}})
	p := e.propose("Give every exported function a doc comment that starts with its name.")
	msg := e.posted(p.ID)
	if !msg.Shows("<https://git.example.com/org/rules/compare/main...proposal/" + p.ID + "|Open the rule PR>") {
		t.Fatalf("message lacks the review link: %v", msg.Strings())
	}
	if err := e.rules.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "person")
	testenv.Git(t, filepath.Dir(clone), "clone", "-q", remote, clone)
	person := func(args ...string) {
		testenv.GitAs(t, clone, "Jane Reviewer", "jane@example.com", args...)
	}
	person("merge", "-q", "--no-ff", "-m", "Merge rule PR "+p.ID, "origin/proposal/"+p.ID)
	person("push", "-q", "origin", "main")
	if err := e.rules.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message to show the merge in git", func() bool {
		m := e.message(p.ID)
		return m.Shows(":white_check_mark: *Approved*") && m.Shows("Jane Reviewer via git") && len(m.Buttons()) == 0
	})
}

func TestAGoneMessageOfADecidedProposalIsRecordedAndNotRetriedForever(t *testing.T) {
	e := newEnv(t, envConfig{})
	p := e.propose("Keep HTTP handlers free of business logic; call a service instead.")
	e.posted(p.ID)
	e.ws.Fail("chat.update", "message_not_found")
	if _, err := e.rules.Reject(context.Background(), rules.RejectRequest{ProposalID: p.ID, By: "carol", Reason: "Too vague to check.", Via: rulefmt.ViaAPI}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the failure to be recorded", func() bool {
		got, post := e.get(p.ID), e.post(p.ID)
		return post.LastError == "message_not_found" && post.PostedRevision == got.Revision
	})
	calls := e.ws.Calls("chat.update")
	time.Sleep(6 * e.opts.PostRetry) // several reconcile rounds
	if n := e.ws.Calls("chat.update"); n != calls {
		t.Fatalf("chat.update called %d more times for a message that is gone", n-calls)
	}
	if n := len(e.ws.TopLevel(testChannel)); n != 1 {
		t.Fatalf("a decided proposal was posted again: %d messages", n)
	}
}
