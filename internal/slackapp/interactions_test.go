package slackapp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestTheFourVariantsReachTheRulesRepository(t *testing.T) {
	e := newEnv(t, envConfig{})
	approved := e.propose("Add unit tests for every new exported function in the retry package.")
	plainReject := e.propose("Log every SQL query the repository layer runs at info level.")
	notedReject := e.propose("Prefix every commit message with the ticket number.")
	for _, p := range []rulefmt.Proposal{approved, plainReject, notedReject} {
		e.posted(p.ID)
	}

	// approve: alice, without a note. The message shows 1/2 and keeps its
	// buttons, now carrying the new revision.
	e.decide(uAlice, approved, ActionApprove, "")
	e.sawEphemeral(uAlice, "You approved `"+approved.ID+"` (1/2 approvals)")
	eventually(t, "1/2 approvals in the message", func() bool {
		m := e.message(approved.ID)
		v, err := DecodeButtonValue(m.Buttons()[ActionApprove])
		return m.Shows("*Approvals:* 1/2 — alice") && err == nil && v.Revision == e.get(approved.ID).Revision
	})
	// approve-with-note: bob. Two distinct approvers: the rule is merged.
	e.decide(uBob, e.get(approved.ID), ActionApprove, "Matches our testing policy.")
	e.sawEphemeral(uBob, "it is approved")
	eventually(t, "the approved outcome in the message", func() bool {
		m := e.message(approved.ID)
		return m.Shows(":white_check_mark: *Approved* — 2/2") && m.Shows("“Matches our testing policy.”") && m.Shows("is on main") && len(m.Buttons()) == 0
	})
	// reject: carol, without a note.
	e.decide(uCarol, plainReject, ActionReject, "")
	// reject-with-note: dave; the note is the reason.
	e.decide(uDave, notedReject, ActionReject, "Ticket numbers belong in the PR title, not in every commit.")
	eventually(t, "both rejections in their messages", func() bool {
		return e.message(plainReject.ID).Shows(":x: *Rejected* by carol via slack") &&
			e.message(notedReject.ID).Shows("> Ticket numbers belong in the PR title, not in every commit.") &&
			len(e.message(notedReject.ID).Buttons()) == 0
	})

	// What the git CLI sees.
	repo := e.repo.Path()
	a := e.get(approved.ID)
	if a.Status != rulefmt.Approved || len(a.Approvals) != 2 || a.MergedCommit == "" {
		t.Fatalf("approved proposal = %+v", a)
	}
	for _, ap := range a.Approvals {
		if ap.Via != rulefmt.ViaSlack {
			t.Errorf("approval %+v not via slack", ap)
		}
	}
	trailers := testenv.Git(t, repo, "log", "-1", "--format=%(trailers)", a.MergedCommit)
	for _, want := range []string{"Approved-by: alice", "Approved-by: bob", "Proposal-Id: " + approved.ID, "Rule-Id: " + a.RuleID} {
		if !strings.Contains(trailers, want) {
			t.Errorf("merge trailers lack %q:\n%s", want, trailers)
		}
	}
	branchLog := testenv.Git(t, repo, "log", "--format=%s%n%(trailers)", rulefmt.ProposalBranch(approved.ID))
	for _, want := range []string{"Approve " + approved.ID + " (1 of 2) by alice", "Approve " + approved.ID + " (2 of 2) by bob", "Via: slack"} {
		if !strings.Contains(branchLog, want) {
			t.Errorf("proposal branch log lacks %q:\n%s", want, branchLog)
		}
	}
	if got := testenv.Git(t, repo, "show", "main:rules/active/coding-agent/"+a.RuleID+".md"); !strings.Contains(got, "Add unit tests for every new exported function") {
		t.Errorf("rule file:\n%s", got)
	}
	good := "main:" + rulefmt.TuningPath("coding-agent", "good", approved.ID, "bob")
	if got := testenv.Git(t, repo, "show", good); !strings.Contains(got, "Matches our testing policy.") || !strings.Contains(got, "ground_truth: true") || !strings.Contains(got, "via: slack") {
		t.Errorf("%s:\n%s", good, got)
	}
	if got := testenv.Git(t, repo, "show", "main:"+rulefmt.TuningPath("coding-agent", "good", approved.ID, "alice")); !strings.Contains(got, "(no note)") {
		t.Errorf("alice's example:\n%s", got)
	}
	for _, tc := range []struct {
		p           rulefmt.Proposal
		who, reason string
	}{
		{plainReject, "carol", "rejected in Slack by carol without a note"},
		{notedReject, "dave", "Ticket numbers belong in the PR title, not in every commit."},
	} {
		got := e.get(tc.p.ID)
		if got.Status != rulefmt.Rejected || got.Rejection == nil || got.Rejection.Rejector != tc.who || got.Rejection.Reason != tc.reason || got.Rejection.Via != rulefmt.ViaSlack {
			t.Errorf("rejection of %s = %+v", tc.p.ID, got.Rejection)
		}
		archived := testenv.Git(t, repo, "show", "main:"+rulefmt.RejectedPath(tc.p.ID))
		if !strings.Contains(archived, tc.reason) {
			t.Errorf("%s lacks the reason:\n%s", rulefmt.RejectedPath(tc.p.ID), archived)
		}
		log := testenv.Git(t, repo, "log", "--format=%(trailers)", "--grep", "Reject "+tc.p.ID, "main")
		if !strings.Contains(log, "Rejected-by: "+tc.who) || !strings.Contains(log, "Via: slack") {
			t.Errorf("rejection trailers:\n%s", log)
		}
		bad := testenv.Git(t, repo, "show", "main:"+rulefmt.TuningPath("coding-agent", "bad", tc.p.ID, tc.who))
		if !strings.Contains(bad, tc.reason) {
			t.Errorf("bad example lacks the reason:\n%s", bad)
		}
	}
	testenv.Git(t, repo, "fsck", "--strict", "--no-dangling")
	if n := len(e.ws.TopLevel(testChannel)); n != 3 {
		t.Fatalf("%d messages in the channel, want 3 (updated, never duplicated)", n)
	}
}

// snapshot is what a refused request must leave unchanged.
type snapshot struct {
	revision, approvals, views int
	status                     rulefmt.ProposalStatus
	commits                    string
}

func (e *env) snapshot(id string) snapshot {
	p := e.get(id)
	return snapshot{revision: p.Revision, approvals: len(p.Approvals), views: len(e.ws.Views()), status: p.Status,
		commits: testenv.Git(e.t, e.repo.Path(), "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/main", "refs/heads/proposal")}
}

func TestBadRequestsAreRefusedWithoutChangingAnything(t *testing.T) {
	e := newEnv(t, envConfig{})
	p := e.propose("Return early instead of nesting the happy path in else branches.")
	msg := e.posted(p.ID)
	v := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: ActionApprove}
	body := fakeslack.InteractionBody(clickPayload(uAlice, v, msg.TS))
	signed := func(at time.Time, b []byte) *http.Request {
		return fakeslack.Request("http://app/slack/interactions", testSecret, at, "application/x-www-form-urlencoded", b)
	}
	payload := func(cb slack.InteractionCallback) []byte { return fakeslack.InteractionBody(cb) }
	unknownAction := clickPayload(uAlice, v, msg.TS)
	unknownAction.ActionCallback.BlockActions[0].ActionID = "escalate"
	badValue := clickPayload(uAlice, v, msg.TS)
	badValue.ActionCallback.BlockActions[0].Value = `{"proposal_id":"p-nope","revision":1,"action":"approve"}`
	mismatched := clickPayload(uAlice, v, msg.TS)
	mismatched.ActionCallback.BlockActions[0].ActionID = ActionReject
	unknownView := submitPayload(uAlice, v, msg.TS, "")
	unknownView.View.CallbackID = "someone_elses_modal"
	badMeta := submitPayload(uAlice, v, msg.TS, "")
	badMeta.View.PrivateMetadata = "{not json"

	replayed := signed(e.clock.Now(), body)
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		code int
		body string
	}{
		{"missing signature", func() *http.Request {
			r := signed(e.clock.Now(), body)
			r.Header.Del("X-Slack-Signature")
			return r
		}, http.StatusUnauthorized, "missing X-Slack-Signature"},
		{"invalid signature", func() *http.Request {
			r := signed(e.clock.Now(), body)
			r.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
			return r
		}, http.StatusUnauthorized, "signature does not match"},
		{"signed with another secret", func() *http.Request {
			return fakeslack.Request("http://app/slack/interactions", "other-secret", e.clock.Now(), "application/x-www-form-urlencoded", body)
		}, http.StatusUnauthorized, "signature does not match"},
		{"body swapped under a signature", func() *http.Request {
			r := signed(e.clock.Now(), body)
			other := signed(e.clock.Now(), append([]byte("x=1&"), body...))
			r.Body, r.ContentLength = other.Body, other.ContentLength
			return r
		}, http.StatusUnauthorized, "signature does not match"},
		{"stale timestamp", func() *http.Request { return signed(e.clock.Now().Add(-6*time.Minute), body) }, http.StatusUnauthorized, "outside the accepted window"},
		{"timestamp from the future", func() *http.Request { return signed(e.clock.Now().Add(6*time.Minute), body) }, http.StatusUnauthorized, "outside the accepted window"},
		{"first delivery of a request", func() *http.Request { return replayed }, http.StatusOK, ""},
		{"replayed request", func() *http.Request {
			ts, _ := strconv.ParseInt(replayed.Header.Get("X-Slack-Request-Timestamp"), 10, 64)
			return signed(time.Unix(ts, 0), body) // the same bytes, signature and timestamp
		}, http.StatusUnauthorized, "already seen"},
		{"not a form", func() *http.Request { return signed(e.clock.Now(), []byte("%zz")) }, http.StatusBadRequest, "missing payload"},
		{"no payload", func() *http.Request { return signed(e.clock.Now(), []byte("token=x")) }, http.StatusBadRequest, "missing payload"},
		{"malformed payload", func() *http.Request {
			return signed(e.clock.Now(), []byte(url.Values{"payload": {"{\"type\":"}}.Encode()))
		}, http.StatusBadRequest, "malformed payload"},
		{"unknown action", func() *http.Request { return signed(e.clock.Now(), payload(unknownAction)) }, http.StatusBadRequest, "unknown action"},
		{"malformed button value", func() *http.Request { return signed(e.clock.Now(), payload(badValue)) }, http.StatusBadRequest, "malformed button value"},
		{"button value disagrees with the action", func() *http.Request { return signed(e.clock.Now(), payload(mismatched)) }, http.StatusBadRequest, "malformed button value"},
		{"unknown view", func() *http.Request { return signed(e.clock.Now(), payload(unknownView)) }, http.StatusBadRequest, "unknown view"},
		{"malformed view metadata", func() *http.Request { return signed(e.clock.Now(), payload(badMeta)) }, http.StatusBadRequest, "malformed view metadata"},
		{"GET", func() *http.Request {
			r := signed(e.clock.Now(), nil)
			r.Method = http.MethodGet
			return r
		}, http.StatusMethodNotAllowed, "POST only"},
		{"too large", func() *http.Request { return signed(e.clock.Now(), make([]byte, maxRequestBody+1)) }, http.StatusRequestEntityTooLarge, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snapshot(p.ID)
			code, got := e.do(tc.req())
			if code != tc.code || !strings.Contains(got, tc.body) {
				t.Fatalf("answer = %d %q, want %d %q", code, got, tc.code, tc.body)
			}
			e.svc.wait()
			after := e.snapshot(p.ID)
			after.views, before.views = 0, 0 // valid clicks open the modal, and nothing else
			if after != before {
				t.Fatalf("state changed: %+v -> %+v", before, after)
			}
		})
	}
}

func TestClicksThatCannotActSayWhyAndChangeNothing(t *testing.T) {
	e := newEnv(t, envConfig{opts: Options{Users: map[string]string{uAlice: "alice", uBob: "bob", uCarol: "carol", "U0ZED": "zed", "U0ERIN": "erin"}},
		rules: rules.Options{Approvers: []string{"alice", "bob", "carol", "erin"}}})
	ctx := context.Background()
	p := e.propose("Keep configuration defaults in one function next to the struct.")
	msg := e.posted(p.ID)
	v := func(action string, rev int) ButtonValue {
		return ButtonValue{ProposalID: p.ID, Revision: rev, Action: action}
	}

	t.Run("unmapped user", func(t *testing.T) {
		before := e.snapshot(p.ID)
		if code, _ := e.click(uMallory, v(ActionApprove, p.Revision), msg.TS); code != http.StatusOK {
			t.Fatalf("click = %d", code)
		}
		e.sawEphemeral(uMallory, "You are not mapped to a precept approver")
		if code, _ := e.submit(uMallory, v(ActionApprove, p.Revision), msg.TS, "sneaky"); code != http.StatusOK {
			t.Fatalf("submit = %d", code)
		}
		e.svc.wait()
		if after := e.snapshot(p.ID); after != before {
			t.Fatalf("state changed: %+v -> %+v", before, after)
		}
	})
	t.Run("mapped but not an approver", func(t *testing.T) {
		before := e.snapshot(p.ID)
		e.submit("U0ZED", v(ActionApprove, p.Revision), msg.TS, "")
		e.sawEphemeral("U0ZED", "zed is not on the approver list")
		if after := e.snapshot(p.ID); after != before {
			t.Fatalf("state changed: %+v -> %+v", before, after)
		}
	})
	t.Run("proposer approving their own rule", func(t *testing.T) {
		before := e.snapshot(p.ID)
		e.submit("U0ERIN", v(ActionApprove, p.Revision), msg.TS, "")
		e.sawEphemeral("U0ERIN", "erin proposed "+p.ID+" and cannot approve it")
		if after := e.snapshot(p.ID); after != before {
			t.Fatalf("state changed: %+v -> %+v", before, after)
		}
	})
	t.Run("double click", func(t *testing.T) {
		e.decide(uAlice, p, ActionApprove, "")
		before := e.snapshot(p.ID)
		cur := e.get(p.ID)
		views := len(e.ws.Views())
		e.click(uAlice, v(ActionApprove, cur.Revision), msg.TS)
		e.sawEphemeral(uAlice, "You (alice) already approved")
		e.submit(uAlice, v(ActionApprove, cur.Revision), msg.TS, "again")
		e.svc.wait()
		if after := e.snapshot(p.ID); after != before || len(e.ws.Views()) != views {
			t.Fatalf("state changed: %+v -> %+v (views %d -> %d)", before, after, views, len(e.ws.Views()))
		}
	})
	t.Run("button from an old revision", func(t *testing.T) {
		old := e.get(p.ID)
		bumpContent(t, e.repo, p.ID)
		before := e.snapshot(p.ID)
		views := len(e.ws.Views())
		e.click(uBob, v(ActionApprove, old.Revision), msg.TS)
		e.sawEphemeral(uBob, "These buttons are from revision "+itoa(int64(old.Revision)))
		e.submit(uBob, v(ActionApprove, old.Revision), msg.TS, "")
		e.svc.wait()
		if after := e.snapshot(p.ID); after != before || len(e.ws.Views()) != views {
			t.Fatalf("state changed: %+v -> %+v", before, after)
		}
		// The message was refreshed: its buttons carry the new revision.
		eventually(t, "the message to carry the current revision", func() bool {
			bv, err := DecodeButtonValue(e.message(p.ID).Buttons()[ActionApprove])
			return err == nil && bv.Revision == e.get(p.ID).Revision
		})
	})
	t.Run("proposal already decided", func(t *testing.T) {
		if _, err := e.rules.Reject(ctx, rules.RejectRequest{ProposalID: p.ID, By: "carol", Reason: "Superseded by the config package rewrite.", Via: rulefmt.ViaAPI}); err != nil {
			t.Fatal(err)
		}
		cur := e.get(p.ID)
		before := e.snapshot(p.ID)
		views := len(e.ws.Views())
		e.click(uBob, v(ActionApprove, cur.Revision), msg.TS)
		e.sawEphemeral(uBob, "was already rejected by carol")
		e.submit(uBob, v(ActionReject, cur.Revision), msg.TS, "me too")
		e.svc.wait()
		if after := e.snapshot(p.ID); after != before || len(e.ws.Views()) != views {
			t.Fatalf("state changed: %+v -> %+v", before, after)
		}
	})
}

func TestConcurrentSubmissionsByOneApproverRecordOneApproval(t *testing.T) {
	e := newEnv(t, envConfig{})
	p := e.propose("Use context deadlines on every outbound network call.")
	msg := e.posted(p.ID)
	v := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: ActionApprove}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Distinct requests (each signed afresh): several modals
			// submitted, not a replay.
			cb := submitPayload(uAlice, v, msg.TS, "note "+itoa(int64(i)))
			code, _ := e.do(fakeslack.Interaction("http://app/slack/interactions", testSecret, e.clock.Now(), cb))
			if code != http.StatusOK {
				t.Errorf("submit = %d", code)
			}
		}()
	}
	wg.Wait()
	e.svc.wait()
	got := e.get(p.ID)
	if len(got.Approvals) != 1 || got.Approvals[0].Approver != "alice" {
		t.Fatalf("approvals = %+v", got.Approvals)
	}
	if n := strings.Count(testenv.Git(t, e.repo.Path(), "log", "--format=%s", rulefmt.ProposalBranch(p.ID)), "Approve "+p.ID); n != 1 {
		t.Fatalf("%d approval commits", n)
	}
}

func TestHandlersAnswerBeforeASlowSlackAPI(t *testing.T) {
	e := newEnv(t, envConfig{})
	p := e.propose("Document every exported error variable with when it is returned.")
	msg := e.posted(p.ID)
	for _, m := range []string{"views.open", "chat.update", "chat.postEphemeral"} {
		e.ws.Delay(m, 2*time.Second)
	}
	// Every work slot is busy (say, with slow ephemeral messages): the
	// modal must not queue behind them.
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	for range cap(e.svc.workSlots) {
		e.svc.async("busy", func(ctx context.Context) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
	}
	v := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: ActionApprove}
	start := time.Now()
	code, _ := e.click(uAlice, v, msg.TS)
	if took := time.Since(start); code != http.StatusOK || took > 500*time.Millisecond {
		t.Fatalf("click answered %d after %v", code, took)
	}
	// The modal still opens: views.open was not queued behind other work
	// and its timeout (2.5 s) outlasts the slow API.
	eventually(t, "the modal", func() bool { return len(e.ws.Views()) == 1 })
	if got := e.ws.Views()[0]; got.TriggerID != "trigger-"+uAlice+"-"+msg.TS || got.View.CallbackID != callbackNote {
		t.Fatalf("view = %+v", got)
	}
	free()
	start = time.Now()
	code, body := e.submit(uAlice, v, msg.TS, "")
	if took := time.Since(start); code != http.StatusOK || body != "" || took > 500*time.Millisecond {
		t.Fatalf("submission answered %d %q after %v", code, body, took)
	}
	eventually(t, "the approval", func() bool { return len(e.get(p.ID).Approvals) == 1 })
}

func TestTheNoteModalCarriesTheButtonAndAnOptionalNote(t *testing.T) {
	e := newEnv(t, envConfig{})
	p := e.propose("Never shadow the err variable inside an if statement.")
	msg := e.posted(p.ID)
	e.click(uCarol, ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: ActionReject}, msg.TS)
	eventually(t, "the modal", func() bool { return len(e.ws.Views()) == 1 })
	view := e.ws.Views()[0].View
	meta, err := decodeNoteMeta(view.PrivateMetadata)
	if err != nil || meta.ProposalID != p.ID || meta.Revision != p.Revision || meta.Action != ActionReject || meta.Channel != testChannel || meta.MessageTS != msg.TS {
		t.Fatalf("metadata = %+v, %v", meta, err)
	}
	if view.Title.Text != "Reject rule" || view.Submit.Text != "Reject" {
		t.Fatalf("title %q submit %q", view.Title.Text, view.Submit.Text)
	}
	b, _ := json.Marshal(view.Blocks)
	for _, want := range []string{`"optional":true`, `"multiline":true`, `"block_id":"note"`, `"action_id":"note"`, "rejected in Slack by carol without a note", "Never shadow the err variable"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("modal lacks %s:\n%s", want, b)
		}
	}
}
