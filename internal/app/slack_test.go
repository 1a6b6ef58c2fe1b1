package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/slack-go/slack"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/slackapp"
	"github.com/precept-dev/precept/lib/fakeslack"
)

const (
	slackSecret  = "d41d8cd98f00b204e9800998ecf8427e"
	slackChannel = "C0RULES"
)

// slackYAML configures Slack against a fake workspace: alice and carol
// are mapped Slack users, vic's decisions mention U0VIC.
func slackYAML(ws *fakeslack.Workspace, extra string) string {
	return fmt.Sprintf(`
slack:
  bot_token: %s
  signing_secret: %s
  channel: %s
  api_url: %s
  post_retry: 100ms
  users: {U0ALICE: alice, U0CAROL: carol}
  reviewers: {vic: U0VIC}
%s`, fakeslack.Token, slackSecret, slackChannel, ws.APIURL(), extra)
}

// postSigned sends a request to preceptd.
func postSigned(t *testing.T, r *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// slackDecide clicks a proposal's button as user, waits for the modal and
// submits it with note, the way Slack sends both.
func slackDecide(t *testing.T, base string, ws *fakeslack.Workspace, user, action, note string, msg fakeslack.Message) {
	t.Helper()
	views := len(ws.Views())
	click := slack.InteractionCallback{
		Type: slack.InteractionTypeBlockActions, User: slack.User{ID: user}, TriggerID: "trigger-" + user,
		Container: slack.Container{Type: "message", ChannelID: msg.Channel, MessageTs: msg.TS},
		ActionCallback: slack.ActionCallbacks{BlockActions: []*slack.BlockAction{{
			ActionID: action, BlockID: "precept_decision", Value: msg.Buttons()[action], Type: "button",
		}}},
	}
	if code, body := postSigned(t, fakeslack.Interaction(base+"/slack/interactions", slackSecret, time.Now(), click)); code != http.StatusOK {
		t.Fatalf("click: %d %s", code, body)
	}
	eventually(t, "the note modal", 10*time.Second, func() bool { return len(ws.Views()) > views })
	view := ws.Views()[views].View
	submit := slack.InteractionCallback{
		Type: slack.InteractionTypeViewSubmission, User: slack.User{ID: user},
		View: slack.View{ID: "V1", Type: slack.VTModal, CallbackID: view.CallbackID, PrivateMetadata: view.PrivateMetadata,
			State: &slack.ViewState{Values: map[string]map[string]slack.BlockAction{"note": {"note": {ActionID: "note", Value: note}}}}},
	}
	if code, body := postSigned(t, fakeslack.Interaction(base+"/slack/interactions", slackSecret, time.Now(), submit)); code != http.StatusOK || body != "" {
		t.Fatalf("submit: %d %q", code, body)
	}
}

// slackMessage waits for the proposal's Slack post and returns it.
func slackMessage(t *testing.T, r *running, ws *fakeslack.Workspace, id string, cond func(fakeslack.Message) bool) fakeslack.Message {
	t.Helper()
	var msg fakeslack.Message
	eventually(t, "the proposal's Slack message", 20*time.Second, func() bool {
		resp, err := ruleClient(r.app.URL(), "connect", viewerToken).GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
		if err != nil || !resp.Msg.GetProposal().GetSlack().GetPosted() {
			return false
		}
		s := resp.Msg.GetProposal().GetSlack()
		m, ok := ws.Message(s.GetChannel(), s.GetTs())
		msg = m
		return ok && cond(m)
	})
	return msg
}

func TestSlackAndAPIApprovalsOfADraftedProposalReachGit(t *testing.T) {
	ws := fakeslack.New(t)
	r := start(t, ruleTokensYAML+"rules: {propose_interval: 200ms}\n"+slackYAML(ws, ""))
	if r.app.Slack == nil {
		t.Fatal("the Slack app was not opened")
	}
	xaddAll(t, r.rdb, clusterEvents())
	p := pendingProposal(t, ruleClient(r.app.URL(), "connect", viewerToken))
	msg := slackMessage(t, r, ws, p.GetProposalId(), func(m fakeslack.Message) bool { return true })
	for _, want := range []string{"3 decisions", "*Reviewers*\n3 distinct", "*Epics*\n2 distinct", "missing unit tests", "Branch `proposal/" + p.GetProposalId() + "`", "*Approvals:* 0/2"} {
		if !msg.Shows(want) {
			t.Errorf("message lacks %q:\n%v", want, msg.Strings())
		}
	}

	// alice approves in Slack with a note; bob through the API.
	slackDecide(t, r.app.URL(), ws, "U0ALICE", slackapp.ActionApprove, "Tests first, always.", msg)
	slackMessage(t, r, ws, p.GetProposalId(), func(m fakeslack.Message) bool { return m.Shows("*Approvals:* 1/2 — alice") })
	if _, err := ruleClient(r.app.URL(), "connect", bobToken).ApproveRule(context.Background(), connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: p.GetProposalId()})); err != nil {
		t.Fatal(err)
	}
	final := slackMessage(t, r, ws, p.GetProposalId(), func(m fakeslack.Message) bool {
		return m.Shows(":white_check_mark: *Approved* — 2/2") && m.Shows("bob via api") && len(m.Buttons()) == 0
	})
	if !final.Shows("alice via slack") || !final.Shows("“Tests first, always.”") {
		t.Fatalf("final message = %v", final.Strings())
	}
	if n := len(ws.TopLevel(slackChannel)); n != 1 {
		t.Fatalf("%d messages in the channel, want 1", n)
	}

	repo := r.app.RulesRepo.Path()
	branch := gitIn(t, repo, "log", "--format=%s%n%(trailers)", "proposal/"+p.GetProposalId())
	for _, want := range []string{"by alice", "Via: slack", "by bob", "Via: api"} {
		if !strings.Contains(branch, want) {
			t.Errorf("proposal branch lacks %q:\n%s", want, branch)
		}
	}
	var pp *preceptv1.Proposal
	eventually(t, "the update to be recorded", 10*time.Second, func() bool {
		got, err := ruleClient(r.app.URL(), "connect", viewerToken).GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: p.GetProposalId()}))
		if err != nil {
			t.Fatal(err)
		}
		pp = got.Msg.GetProposal()
		return pp.GetSlack().GetPostedRevision() == pp.GetRevision()
	})
	example := gitIn(t, repo, "show", "main:tuning/examples/coding-agent/good/"+p.GetProposalId()+"-alice.md")
	if !strings.Contains(example, "Tests first, always.") || !strings.Contains(example, "via: slack") {
		t.Errorf("alice's tuning example:\n%s", example)
	}
	// The API (and so `precept proposals show`) says where it was posted.
	if s := pp.GetSlack(); !s.GetPosted() || s.GetChannel() != slackChannel || s.GetTs() != msg.TS || s.GetPermalink() == "" || s.GetLastError() != "" || s.GetPostedRevision() != pp.GetRevision() {
		t.Fatalf("slack post over the API = %v", s)
	}
	gitIn(t, repo, "fsck", "--strict", "--no-dangling")
}

// carolTokenYAML gives carol, who decides in Slack, an approver's token
// (append it to ruleTokensYAML): without one she may not decide.
const carolTokenYAML = "    - {name: carol, role: approver, token: carol-approver-token-012}\n"

func TestSlackRejectionWithoutANoteRecordsTheDefaultReason(t *testing.T) {
	ws := fakeslack.New(t)
	r := start(t, ruleTokensYAML+carolTokenYAML+slackYAML(ws, ""))
	resp, err := ruleClient(r.app.URL(), "connect", aliceToken).ProposeRule(context.Background(), connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Log every SQL statement the repository layer runs at info level.", Rationale: "Debugging.",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetProposal().GetProposalId()
	msg := slackMessage(t, r, ws, id, func(fakeslack.Message) bool { return true })
	slackDecide(t, r.app.URL(), ws, "U0CAROL", slackapp.ActionReject, "", msg)
	slackMessage(t, r, ws, id, func(m fakeslack.Message) bool {
		return m.Shows(":x: *Rejected* by carol via slack") && len(m.Buttons()) == 0
	})
	archived := gitIn(t, r.app.RulesRepo.Path(), "show", "main:rules/rejected/"+id+".md")
	if !strings.Contains(archived, "rejected in Slack by carol without a note") {
		t.Fatalf("rejected proposal:\n%s", archived)
	}
	if trailers := gitIn(t, r.app.RulesRepo.Path(), "log", "-1", "--format=%(trailers)", "main"); !strings.Contains(trailers, "Rejected-by: carol") {
		t.Fatalf("trailers:\n%s", trailers)
	}
}

func TestSlackEndpointsVerifyRequestsAcrossTheSharedRedis(t *testing.T) {
	ws := fakeslack.New(t)
	r := start(t, slackYAML(ws, ""))
	challenge := map[string]any{"type": "url_verification", "challenge": "chal-123"}
	req := fakeslack.Event(r.app.URL()+"/slack/events", slackSecret, time.Now(), challenge)
	body, _ := json.Marshal(challenge)
	if code, got := postSigned(t, req); code != http.StatusOK || !strings.Contains(got, `"challenge":"chal-123"`) {
		t.Fatalf("url_verification = %d %q", code, got)
	}
	// The same signed bytes again: a replay, refused through Redis.
	again := fakeslack.Request(r.app.URL()+"/slack/events", slackSecret, time.Unix(mustUnix(t, req), 0), "application/json", body)
	if code, got := postSigned(t, again); code != http.StatusUnauthorized || !strings.Contains(got, "already seen") {
		t.Fatalf("replay = %d %q", code, got)
	}
	if n, err := r.rdb.Keys(context.Background(), "precept:slack:seen:*").Result(); err != nil || len(n) != 1 {
		t.Fatalf("seen signatures in Redis = %v, %v", n, err)
	}
	unsigned, _ := http.NewRequest(http.MethodPost, r.app.URL()+"/slack/interactions", strings.NewReader("payload=%7B%7D"))
	if code, _ := postSigned(t, unsigned); code != http.StatusUnauthorized {
		t.Fatalf("unsigned interaction = %d", code)
	}
	resp, err := http.Get(r.app.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`precept_slack_requests_total{endpoint="events",outcome="url_verification"} 1`,
		`precept_slack_requests_total{endpoint="events",outcome="unauthorized"} 1`,
		`precept_slack_requests_total{endpoint="interactions",outcome="unauthorized"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func mustUnix(t *testing.T, r *http.Request) int64 {
	t.Helper()
	var ts int64
	if _, err := fmt.Sscan(r.Header.Get("X-Slack-Request-Timestamp"), &ts); err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestWithoutSlackConfiguredNoEndpointIsMounted(t *testing.T) {
	r := start(t, "")
	if r.app.Slack != nil {
		t.Fatal("Slack app opened without a bot token")
	}
	resp, err := http.Post(r.app.URL()+"/slack/events", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/slack/events = %d", resp.StatusCode)
	}
}

func TestAmbiguousDecisionIsClarifiedInASlackThread(t *testing.T) {
	ws := fakeslack.New(t)
	r := start(t, ruleTokensYAML+slackYAML(ws, "  clarification: {scan_interval: 200ms}\nfeatures: {clarification: true}\n"))
	xaddAll(t, r.rdb, []map[string]any{event("vague-1", "reviewer_id", "vic", "reviewer_comment", "fix this")})
	var question fakeslack.Message
	eventually(t, "the clarification question", 20*time.Second, func() bool {
		for _, m := range ws.TopLevel(slackChannel) {
			if strings.Contains(m.Text, "vague-1") {
				question = m
				return true
			}
		}
		return false
	})
	if !strings.Contains(question.Text, "<@U0VIC>") || !strings.Contains(question.Text, "Question 1 of 3") {
		t.Fatalf("question = %q", question.Text)
	}
	reply := ws.Reply(slackChannel, question.TS, "U0VIC", "The retry helper in retry.go has no unit tests; add table tests because regressions slip through.")
	ev := map[string]any{"type": "event_callback", "event_id": "Ev0001", "event": map[string]any{
		"type": "message", "channel": slackChannel, "user": "U0VIC", "text": reply.Text, "ts": reply.TS, "thread_ts": question.TS,
	}}
	if code, body := postSigned(t, fakeslack.Event(r.app.URL()+"/slack/events", slackSecret, time.Now(), ev)); code != http.StatusOK {
		t.Fatalf("event = %d %q", code, body)
	}
	evaluator := func() *preceptv1.ListNeedsReviewResponse {
		c := preceptv1connect.NewEvaluatorServiceClient(protocols(r.app.URL(), viewerToken)["connect"], r.app.URL())
		resp, err := c.ListNeedsReview(context.Background(), connect.NewRequest(&preceptv1.ListNeedsReviewRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg
	}
	eventually(t, "the clarified decision to leave the review queue", 20*time.Second, func() bool { return len(evaluator().GetItems()) == 0 })
	eventually(t, "the thanks in the thread", 10*time.Second, func() bool {
		th := ws.Thread(slackChannel, question.TS)
		return len(th) == 2 && strings.Contains(th[1].Text, "that is clear now")
	})
}

// slackClickAndSubmit sends user's click on a proposal's button and then
// the note modal's submission, as Slack would after the modal opened. It
// does not wait for the modal: a refused click opens none, and the
// submission must be refused on its own.
func slackClickAndSubmit(t *testing.T, base, user, action string, msg fakeslack.Message) {
	t.Helper()
	click := slack.InteractionCallback{
		Type: slack.InteractionTypeBlockActions, User: slack.User{ID: user}, TriggerID: "trigger-" + user,
		Container: slack.Container{Type: "message", ChannelID: msg.Channel, MessageTs: msg.TS},
		ActionCallback: slack.ActionCallbacks{BlockActions: []*slack.BlockAction{{
			ActionID: action, BlockID: "precept_decision", Value: msg.Buttons()[action], Type: "button",
		}}},
	}
	if code, body := postSigned(t, fakeslack.Interaction(base+"/slack/interactions", slackSecret, time.Now(), click)); code != http.StatusOK {
		t.Fatalf("click: %d %s", code, body)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(msg.Buttons()[action]), &meta); err != nil {
		t.Fatal(err)
	}
	meta["channel"], meta["message_ts"] = msg.Channel, msg.TS
	md, _ := json.Marshal(meta)
	submit := slack.InteractionCallback{
		Type: slack.InteractionTypeViewSubmission, User: slack.User{ID: user},
		View: slack.View{ID: "V-" + user, Type: slack.VTModal, CallbackID: "precept_note", PrivateMetadata: string(md),
			State: &slack.ViewState{Values: map[string]map[string]slack.BlockAction{"note": {"note": {ActionID: "note", Value: "looks fine"}}}}},
	}
	if code, body := postSigned(t, fakeslack.Interaction(base+"/slack/interactions", slackSecret, time.Now(), submit)); code != http.StatusOK {
		t.Fatalf("submit: %d %q", code, body)
	}
}

func TestSlackDecisionsNeedTheApproverRoleTheAPIWouldAsk(t *testing.T) {
	ws := fakeslack.New(t)
	yaml := ruleTokensYAML + strings.Replace(slackYAML(ws, ""), "users: {U0ALICE: alice, U0CAROL: carol}",
		"users: {U0ALICE: alice, U0VIEWER: viewer, U0GHOST: ghost}", 1)
	r := start(t, yaml)
	rules := ruleClient(r.app.URL(), "connect", bobToken)
	resp, err := rules.ProposeRule(context.Background(), connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Add table tests for every exported function in the retry package.", Rationale: "Seen in reviews.",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetProposal().GetProposalId()
	msg := slackMessage(t, r, ws, id, func(fakeslack.Message) bool { return true })

	// viewer's token is a reader and ghost has none: over the API both
	// would get permission_denied, so Slack refuses them too.
	for _, user := range []string{"U0VIEWER", "U0GHOST"} {
		slackClickAndSubmit(t, r.app.URL(), user, slackapp.ActionApprove, msg)
	}
	eventually(t, "both refusals", 10*time.Second, func() bool {
		refused := map[string]bool{}
		for _, e := range ws.Ephemerals() {
			if strings.Contains(e.Text, "approver role") {
				refused[e.User] = true
			}
		}
		return refused["U0VIEWER"] && refused["U0GHOST"]
	})
	// alice's token is an approver's: her approval counts.
	slackDecide(t, r.app.URL(), ws, "U0ALICE", slackapp.ActionApprove, "", msg)
	slackMessage(t, r, ws, id, func(m fakeslack.Message) bool { return m.Shows("*Approvals:* 1/2 — alice") })
	got, err := rules.GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
	if err != nil {
		t.Fatal(err)
	}
	var approvers []string
	for _, a := range got.Msg.GetProposal().GetApprovals() {
		approvers = append(approvers, a.GetApprover())
	}
	if len(approvers) != 1 || approvers[0] != "alice" {
		t.Fatalf("approvals = %v, want alice's only", approvers)
	}
	for _, want := range []string{"identity=viewer", "identity=ghost"} {
		if !strings.Contains(r.logs.String(), "Slack user mapped to an identity that may not approve") || !strings.Contains(r.logs.String(), want) {
			t.Errorf("no start-up warning about %s:\n%s", want, r.logs.String())
		}
	}
}

func TestWithoutTokensOnlyListedApproversDecideInSlack(t *testing.T) {
	ws := fakeslack.New(t)
	r := start(t, "rules: {approvers: [local, alice]}\n"+slackYAML(ws, ""))
	local := ruleClient(r.app.URL(), "connect", "")
	resp, err := local.ProposeRule(context.Background(), connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Close every response body the HTTP client returns.", Rationale: "Leaks.",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetProposal().GetProposalId()
	msg := slackMessage(t, r, ws, id, func(fakeslack.Message) bool { return true })
	// carol is mapped but rules.approvers does not name her.
	slackClickAndSubmit(t, r.app.URL(), "U0CAROL", slackapp.ActionReject, msg)
	eventually(t, "carol's refusal", 10*time.Second, func() bool {
		for _, e := range ws.Ephemerals() {
			if e.User == "U0CAROL" && strings.Contains(e.Text, "carol, which has no precept role") {
				return true
			}
		}
		return false
	})
	slackDecide(t, r.app.URL(), ws, "U0ALICE", slackapp.ActionApprove, "", msg)
	slackMessage(t, r, ws, id, func(m fakeslack.Message) bool { return m.Shows("*Approvals:* 1/2 — alice") })
	if !strings.Contains(r.logs.String(), "without auth.tokens only identities on rules.approvers decide in Slack") || !strings.Contains(r.logs.String(), "identity=carol") {
		t.Errorf("no start-up warning about carol:\n%s", r.logs.String())
	}
}

func TestSlackDecisionsNeedTheRoleTheAPIAsksOfApproveAndReject(t *testing.T) {
	for _, proc := range []string{preceptv1connect.RuleServiceApproveRuleProcedure, preceptv1connect.RuleServiceRejectRuleProcedure} {
		if need := api.RequiredRole(proc); need != slackapp.DecisionRole {
			t.Errorf("%s needs %s over the API, %s in Slack", proc, need, slackapp.DecisionRole)
		}
	}
}
