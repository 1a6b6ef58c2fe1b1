package slackapp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Slack users of the role tests: reed's identity holds a reader's token,
// gus's identity no token at all.
const (
	uReed = "U0REED"
	uGus  = "U0GUS"
)

func TestSlackDecisionsNeedTheMappedIdentitysApproverRole(t *testing.T) {
	e := newEnv(t, envConfig{
		opts: Options{
			Users: map[string]string{uAlice: "alice", uBob: "bob", uReed: "reed", uGus: "gus"},
			Roles: map[string]precept.Role{"alice": precept.RoleApprover, "bob": precept.RoleAdmin, "reed": precept.RoleReader},
		},
		// Being on the approver list does not stand in for the role.
		rules: rules.Options{Approvers: []string{"alice", "bob", "reed", "gus"}},
	})
	p := e.propose("Wrap every error returned across a package boundary with context.")
	msg := e.posted(p.ID)
	// e's helpers fail the whole test, so these are not subtests.
	for _, tc := range []struct {
		user, action, why string
	}{
		{uReed, ActionApprove, "reed, which has the reader role"},
		{uGus, ActionApprove, "gus, which has no precept role"},
		{uGus, ActionReject, "gus, which has no precept role"},
	} {
		before := e.snapshot(p.ID)
		v := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: tc.action}
		if code, body := e.click(tc.user, v, msg.TS); code != http.StatusOK || body != "" {
			t.Fatalf("click = %d %q", code, body)
		}
		e.sawEphemeral(tc.user, tc.why)
		e.sawEphemeral(tc.user, "did not record your click")
		// A submission sent anyway is refused on its own.
		if code, body := e.submit(tc.user, v, msg.TS, "fine by me"); code != http.StatusOK || body != "" {
			t.Fatalf("submit = %d %q", code, body)
		}
		e.svc.wait()
		e.sawEphemeral(tc.user, "did not record your decision")
		after := e.snapshot(p.ID)
		if after != before {
			t.Fatalf("state changed: %+v -> %+v", before, after)
		}
		for _, m := range e.ephemeralsTo(tc.user) {
			if !strings.Contains(m, "approver role") {
				t.Errorf("refusal does not name the role it needs: %q", m)
			}
		}
	}
	// An approver's and an admin's decisions count; two merge the rule.
	e.decide(uAlice, p, ActionApprove, "")
	e.decide(uBob, e.get(p.ID), ActionApprove, "")
	if got := e.get(p.ID); got.Status != rulefmt.Approved || len(got.Approvals) != 2 {
		t.Fatalf("after alice and bob: %s with %d approvals", got.Status, len(got.Approvals))
	}
}

func TestOnlyTheReviewerOrAnApproverMayClarify(t *testing.T) {
	r := newClarifyEnv(t, envConfig{opts: Options{
		Users: map[string]string{uAlice: "alice", uReed: "reed"},
		Roles: map[string]precept.Role{"alice": precept.RoleApprover, "reed": precept.RoleReader},
	}})
	r.add(negative("v", "vic", vagueComment, r.clock.Now()))
	r.drain()
	ch, root := r.asked("v")
	replies := func() int { return len(r.review("v").Replies) }
	before := replies()
	r.reply(ch, root, uReed, "The retry helper lacks unit tests; add table tests because regressions slip through.")
	if replies() != before {
		t.Fatal("a reader's reply was added to someone else's decision")
	}
	r.sawEphemeral(uReed, "Only the reviewer of this decision (or a precept approver)")
	r.reply(ch, root, uAlice, "The retry helper in retry.go has no unit tests; add table tests because regressions slip through.")
	if replies() != before+1 {
		t.Fatalf("replies = %d, want the approver's added to %d", replies(), before)
	}
}
