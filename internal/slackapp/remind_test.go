package slackapp

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// round runs one full reconcile of the poster, as its ticker does: posts
// what is missing and reminds what is overdue.
func (e *env) round() {
	e.t.Helper()
	e.svc.post.reconcileSoon()
	e.svc.postRound(context.Background())
}

// reminders returns the replies in a proposal's thread.
func (e *env) reminders(id string) []string {
	e.t.Helper()
	post := e.post(id)
	if post == nil || !post.shown() {
		e.t.Fatalf("%s was not posted", id)
	}
	var out []string
	for _, m := range e.ws.Thread(post.Channel, post.TS) {
		out = append(out, m.Text)
	}
	return out
}

func TestAProposalPastItsApprovalDeadlineIsRemindedInItsThreadOncePerPeriod(t *testing.T) {
	e := newEnv(t, envConfig{noRun: true})
	p := e.propose("Cite the ticket in every commit message.")
	e.round()
	e.posted(p.ID)

	e.clock.Advance(47 * time.Hour)
	e.round()
	if got := e.reminders(p.ID); len(got) != 0 {
		t.Fatalf("reminded within the deadline: %q", got)
	}

	e.clock.Advance(2 * time.Hour)
	e.round()
	e.round()
	got := e.reminders(p.ID)
	if len(got) != 1 {
		t.Fatalf("reminders after 49h: %q, want one", got)
	}
	for _, want := range []string{p.ID, "waited 2d 1h", "deadline of 2d", "needs 2 more valid approvals",
		"<@U0ALICE> (alice)", "<@U0BOB> (bob)", "<@U0CAROL> (carol)", "<@U0DAVE> (dave)"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("reminder %q does not say %q", got[0], want)
		}
	}
	var m dto.Metric
	if err := e.svc.metrics.reminders.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Errorf("precept_slack_approval_reminders_total = %v, want 1", n)
	}
	if top := e.ws.TopLevel(testChannel); len(top) != 1 {
		t.Errorf("the reminder went outside the thread: %d top-level messages", len(top))
	}

	// Alice approves; the next period's reminder asks for one more and
	// no longer names her.
	if _, err := e.rules.Approve(context.Background(), rules.ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI, Revision: e.get(p.ID).Revision}); err != nil {
		t.Fatal(err)
	}
	e.round()
	e.clock.Advance(48 * time.Hour)
	e.round()
	got = e.reminders(p.ID)
	if len(got) != 2 {
		t.Fatalf("reminders after 97h: %q, want two", got)
	}
	if !strings.Contains(got[1], "needs 1 more valid approval.") || strings.Contains(got[1], "alice") {
		t.Errorf("second reminder %q: want one more approval asked of the others", got[1])
	}

	// A decided proposal is not reminded.
	if _, err := e.rules.Approve(context.Background(), rules.ApproveRequest{ProposalID: p.ID, By: "bob", Via: rulefmt.ViaAPI, Revision: e.get(p.ID).Revision}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(48 * time.Hour)
	e.round()
	if got := e.reminders(p.ID); len(got) != 2 {
		t.Errorf("a decided proposal was reminded: %q", got)
	}
}

func TestAnApprovalReminderIsNotRepeatedAfterARestartThatLostTheStore(t *testing.T) {
	first := newEnv(t, envConfig{noRun: true})
	p := first.propose("Cite the ticket in every commit message.")
	first.round()
	first.posted(p.ID)
	first.clock.Advance(50 * time.Hour)
	first.round()
	if got := first.reminders(p.ID); len(got) != 1 {
		t.Fatalf("reminders: %q, want one", got)
	}
	first.stop()

	// The restarted server's Store is empty (an embedded Redis loses its
	// keys): the period recorded with the post keeps it from reminding
	// again.
	second := newEnv(t, envConfig{noRun: true, repo: first.repo, ws: first.ws, opts: Options{Now: first.clock.Now}})
	second.round()
	if got := second.reminders(p.ID); len(got) != 1 {
		t.Fatalf("reminders after the restart: %q, want still one", got)
	}
}

func TestReplicasSharingRedisPostOneApprovalReminderPerPeriod(t *testing.T) {
	rdb := testenv.RedisClient(t, testenv.Redis(t))
	clock := newClock()
	var replicas []*env
	for range 3 {
		cfg := envConfig{noRun: true, store: NewRedisStore(rdb, "precept:slack:"), opts: Options{Now: clock.Now}}
		if len(replicas) > 0 {
			cfg.repo, cfg.ws = replicas[0].repo, replicas[0].ws
		}
		replicas = append(replicas, newEnv(t, cfg))
	}
	p := replicas[0].propose("Cite the ticket in every commit message.")
	replicas[0].round()
	replicas[0].posted(p.ID)
	for period := 1; period <= 2; period++ {
		clock.Advance(48 * time.Hour)
		var wg sync.WaitGroup
		for _, r := range replicas {
			wg.Go(func() { r.svc.postRound(context.Background()) })
		}
		for _, r := range replicas {
			r.svc.post.reconcileSoon()
		}
		wg.Wait()
		for _, r := range replicas {
			r.round()
		}
		if got := replicas[0].reminders(p.ID); len(got) != period {
			t.Fatalf("period %d: %d reminders, want %d: %q", period, len(got), period, got)
		}
	}
}

func TestAFailedApprovalReminderIsRetried(t *testing.T) {
	e := newEnv(t, envConfig{noRun: true})
	p := e.propose("Cite the ticket in every commit message.")
	e.round()
	e.posted(p.ID)
	e.clock.Advance(49 * time.Hour)
	e.ws.Fail("chat.postMessage", "ratelimited")
	e.round()
	if got := e.reminders(p.ID); len(got) != 0 {
		t.Fatalf("reminders while Slack fails: %q", got)
	}
	e.ws.Fail("chat.postMessage", "")
	e.round()
	if got := e.reminders(p.ID); len(got) != 1 {
		t.Fatalf("reminders after Slack recovered: %q, want one", got)
	}
}

func TestApprovalRemindersOffWithANegativeSLA(t *testing.T) {
	e := newEnv(t, envConfig{noRun: true, opts: Options{ApprovalSLA: -1}})
	p := e.propose("Cite the ticket in every commit message.")
	e.round()
	e.posted(p.ID)
	e.clock.Advance(500 * time.Hour)
	e.round()
	if got := e.reminders(p.ID); len(got) != 0 {
		t.Fatalf("reminded with deadlines off: %q", got)
	}
}

func TestWithoutAnApproverListTheReminderNamesTheSlackUsersWhoMayApprove(t *testing.T) {
	e := newEnv(t, envConfig{noRun: true, rules: rules.Options{Approvers: []string{}}, opts: Options{
		Users: map[string]string{uAlice: "alice", uBob: "bob", uVic: "vic"},
		Roles: map[string]precept.Role{"alice": precept.RoleApprover, "bob": precept.RoleAdmin, "vic": precept.RoleReader},
	}})
	p := e.propose("Cite the ticket in every commit message.")
	e.round()
	e.posted(p.ID)
	e.clock.Advance(49 * time.Hour)
	e.round()
	got := e.reminders(p.ID)
	if len(got) != 1 || !strings.Contains(got[0], "Who may approve: <@U0ALICE> (alice), <@U0BOB> (bob).") {
		t.Fatalf("reminders: %q, want alice and bob named, not vic (a reader)", got)
	}
}

func TestAProposalWithAllItsApprovalsIsNotReminded(t *testing.T) {
	e := newEnv(t, envConfig{noRun: true})
	p := e.propose("Cite the ticket in every commit message.")
	e.round()
	e.posted(p.ID)
	// The proposal holds every approval it needs and is still pending:
	// its merge is held (a merge refused in git, a guard), which is no
	// business of the approvers.
	_, err := e.repo.Update(context.Background(), rulefmt.ProposalBranch(p.ID), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		got := e.get(p.ID)
		for _, by := range []string{"alice", "bob"} {
			got.Approvals = append(got.Approvals, rulefmt.Approval{Approver: by, At: e.clock.Now(), TextSHA256: got.TextSHA256()})
		}
		data, err := got.Marshal()
		if err != nil {
			return nil, err
		}
		return &gitrepo.CommitSpec{Message: "Approvals recorded, merge held", Changes: []gitrepo.Change{{Path: rulefmt.ProposalPath(p.ID), Data: data}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.get(p.ID); got.Status != rulefmt.Pending || len(got.ValidApprovals()) < got.Required {
		t.Fatalf("setup: status %s with %d of %d approvals", got.Status, len(got.ValidApprovals()), got.Required)
	}
	e.clock.Advance(49 * time.Hour)
	e.round()
	if got := e.reminders(p.ID); len(got) != 0 {
		t.Fatalf("a proposal needing no more approvals was reminded: %q", got)
	}
}

func TestRaisingTheApprovalSLAKeepsTheRemindersComing(t *testing.T) {
	first := newEnv(t, envConfig{noRun: true})
	p := first.propose("Cite the ticket in every commit message.")
	first.round()
	first.posted(p.ID)
	first.clock.Advance(49 * time.Hour)
	first.round()
	if got := first.reminders(p.ID); len(got) != 1 {
		t.Fatalf("reminders after 49h: %q, want one", got)
	}
	first.stop()

	// Restarted with a 72h deadline: the next reminder is due 72h after
	// the last one (at 121h), not at the second 72h period (144h).
	second := newEnv(t, envConfig{noRun: true, repo: first.repo, ws: first.ws, opts: Options{Now: first.clock.Now, ApprovalSLA: 72 * time.Hour}})
	first.clock.Advance(71 * time.Hour)
	second.round()
	if got := second.reminders(p.ID); len(got) != 1 {
		t.Fatalf("reminders 71h after the last with a 72h deadline: %q, want still one", got)
	}
	first.clock.Advance(2 * time.Hour)
	second.round()
	second.round()
	got := second.reminders(p.ID)
	if len(got) != 2 {
		t.Fatalf("reminders 73h after the last with a 72h deadline: %q, want two", got)
	}
	if !strings.Contains(got[1], "deadline of 3d") {
		t.Errorf("second reminder %q: want the 3d deadline", got[1])
	}
}

func TestARecordFromBeforeRemindedAtDatesItsLastReminderByItsPeriod(t *testing.T) {
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	p := rulefmt.Proposal{CreatedAt: created}
	if got := lastReminder(p, &Post{}, 48*time.Hour); !got.IsZero() {
		t.Errorf("never reminded: %v, want zero", got)
	}
	if got, want := lastReminder(p, &Post{RemindedPeriod: 2}, 48*time.Hour), created.Add(96*time.Hour); !got.Equal(want) {
		t.Errorf("period 2 of 48h: %v, want %v", got, want)
	}
	at := created.Add(50 * time.Hour)
	if got := lastReminder(p, &Post{RemindedPeriod: 2, RemindedAt: at}, 48*time.Hour); !got.Equal(at) {
		t.Errorf("reminded_at recorded: %v, want %v", got, at)
	}
}
