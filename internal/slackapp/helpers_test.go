package slackapp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

const (
	testSecret  = "e3b0c44298fc1c149afbf4c8996fb924"
	testChannel = "C0RULES"
)

// Slack users of the tests: alice and bob approve, carol rejects, mallory
// is not mapped, vic reviewed decisions.
const (
	uAlice   = "U0ALICE"
	uBob     = "U0BOB"
	uCarol   = "U0CAROL"
	uDave    = "U0DAVE"
	uMallory = "U0MALLORY"
	uVic     = "U0VIC"
)

// newClock returns a test clock reading the current second.
func newClock() *testenv.Clock { return testenv.NewClock(time.Now().UTC().Truncate(time.Second)) }

// env is a Slack app on a fake workspace, a real rule manager on a fresh
// git repository, and an HTTP server with the app's endpoints.
type env struct {
	t     *testing.T
	ws    *fakeslack.Workspace
	repo  *gitrepo.Repo
	rules *rules.Manager
	store Store
	clock *testenv.Clock
	svc   *Service
	srv   *httptest.Server
	logs  *testenv.SyncBuffer
	opts  Options
	stop  func()
}

type envConfig struct {
	opts  Options
	rules rules.Options
	clar  Clarifications
	// noRun leaves the Service's loops stopped.
	noRun bool
	// repo reuses a repository (a restart).
	repo *gitrepo.Repo
	// ws reuses a workspace.
	ws    *fakeslack.Workspace
	store Store
	// feedbackRepo is the feedback repository replicas share.
	feedbackRepo *gitrepo.Repo
	// clarify configures the clarification domain.
	clarify clarification.Options
	// curation turns merge suggestions on.
	curation Curation
	// impact shows impact previews.
	impact ImpactSummaries
}

func newEnv(t *testing.T, cfg envConfig) *env {
	t.Helper()
	e := &env{t: t, clock: newClock(), logs: &testenv.SyncBuffer{}}
	e.ws = cfg.ws
	if e.ws == nil {
		e.ws = fakeslack.New(t)
	}
	e.repo = cfg.repo
	if e.repo == nil {
		repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { repo.Close() })
		e.repo = repo
	}
	ro := cfg.rules
	if ro.Approvers == nil {
		ro.Approvers = []string{"alice", "bob", "carol", "dave"}
	}
	m, err := rules.New(e.repo, ro)
	if err != nil {
		t.Fatal(err)
	}
	e.rules = m
	e.store = cfg.store
	if e.store == nil {
		e.store = NewMemoryStore(e.clock.Now)
	}
	o := cfg.opts
	o.Channel, o.SigningSecret = testChannel, testSecret
	if cfg.impact != nil {
		o.Impact = cfg.impact
	}
	if o.Users == nil {
		o.Users = map[string]string{uAlice: "alice", uBob: "bob", uCarol: "carol", uDave: "dave"}
	}
	if o.Roles == nil {
		// Every mapped identity holds an approver's token.
		o.Roles = map[string]precept.Role{}
		for _, name := range o.Users {
			o.Roles[name] = precept.RoleApprover
		}
	}
	if o.Approvers == nil {
		o.Approvers = ro.Approvers
	}
	if o.Now == nil {
		o.Now = e.clock.Now
	}
	if o.PostRetry == 0 {
		o.PostRetry = 50 * time.Millisecond
	}
	o.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.opts = o
	var clar Clarifications
	if cfg.clar != nil {
		clar = cfg.clar
	}
	svc, err := New(e.ws.Client(), m, NewPosts(e.repo, m, e.clock.Now, nil), clar, e.store, o)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	if cfg.curation != nil {
		svc.SetCuration(cfg.curation)
	}
	m.OnChange(svc.RuleChanged)
	mux := http.NewServeMux()
	mux.Handle("/slack/interactions", svc.Interactions())
	mux.Handle("/slack/events", svc.Events())
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if cfg.noRun {
		close(done)
	} else {
		go func() { svc.Run(ctx); close(done) }()
	}
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if cfg.noRun {
				svc.shutdown()
			}
		})
	}
	t.Cleanup(e.stop)
	return e
}

// propose commits a manual proposal.
func (e *env) propose(content string, tags ...string) rulefmt.Proposal {
	e.t.Helper()
	p, err := e.rules.Propose(context.Background(), rules.ManualProposal{
		Agents: []string{"coding-agent"}, Content: content, Rationale: "Seen in three reviews.", Tags: tags,
	}, precept.Identity{Name: "erin", Role: precept.RoleApprover})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) get(id string) rulefmt.Proposal {
	e.t.Helper()
	p, err := e.rules.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// post returns where a proposal was posted, nil when it has no record.
func (e *env) post(id string) *Post {
	e.t.Helper()
	p, ok, err := NewPosts(e.repo, e.rules, nil, nil).Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	if !ok {
		return nil
	}
	return &p
}

// posted waits for a proposal's message and returns it.
func (e *env) posted(id string) fakeslack.Message {
	e.t.Helper()
	var msg fakeslack.Message
	eventually(e.t, "the proposal's Slack message", func() bool {
		p := e.post(id)
		if p == nil || !p.Posted {
			return false
		}
		m, ok := e.ws.Message(p.Channel, p.TS)
		msg = m
		return ok
	})
	return msg
}

// message returns the proposal's current message.
func (e *env) message(id string) fakeslack.Message {
	e.t.Helper()
	p := e.post(id)
	if p == nil {
		e.t.Fatalf("%s was not posted", id)
	}
	m, ok := e.ws.Message(p.Channel, p.TS)
	if !ok {
		e.t.Fatalf("%s's message %s is not in the workspace", id, p.TS)
	}
	return m
}

// do sends a request to the app and returns the status and body.
func (e *env) do(r *http.Request) (int, string) {
	e.t.Helper()
	u := strings.TrimPrefix(r.URL.String(), "http://app")
	req, err := http.NewRequest(r.Method, e.srv.URL+u, r.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header = r.Header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// click sends a signed block_actions payload for a proposal button.
func (e *env) click(user string, v ButtonValue, msgTS string) (int, string) {
	e.t.Helper()
	return e.do(fakeslack.Interaction("http://app/slack/interactions", testSecret, e.clock.Now(), clickPayload(user, v, msgTS)))
}

func clickPayload(user string, v ButtonValue, msgTS string) slack.InteractionCallback {
	val, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	cb := slack.InteractionCallback{
		Type:      slack.InteractionTypeBlockActions,
		User:      slack.User{ID: user, Name: strings.ToLower(strings.TrimPrefix(user, "U0"))},
		TriggerID: "trigger-" + user + "-" + msgTS,
		Container: slack.Container{Type: "message", ChannelID: testChannel, MessageTs: msgTS},
		Channel:   slack.Channel{GroupConversation: slack.GroupConversation{Conversation: slack.Conversation{ID: testChannel}}},
		ActionCallback: slack.ActionCallbacks{BlockActions: []*slack.BlockAction{{
			ActionID: v.Action, BlockID: blockDecision, Value: string(val), Type: "button",
		}}},
	}
	return cb
}

// submit sends a signed view_submission of the note modal.
func (e *env) submit(user string, v ButtonValue, msgTS, note string) (int, string) {
	e.t.Helper()
	return e.do(fakeslack.Interaction("http://app/slack/interactions", testSecret, e.clock.Now(), submitPayload(user, v, msgTS, note)))
}

func submitPayload(user string, v ButtonValue, msgTS, note string) slack.InteractionCallback {
	md, err := noteMeta{ButtonValue: v, Channel: testChannel, MessageTS: msgTS}.encode()
	if err != nil {
		panic(err)
	}
	return slack.InteractionCallback{
		Type: slack.InteractionTypeViewSubmission,
		User: slack.User{ID: user},
		View: slack.View{
			ID: "V1", Type: slack.VTModal, CallbackID: callbackNote, PrivateMetadata: md,
			State: &slack.ViewState{Values: map[string]map[string]slack.BlockAction{
				blockNote: {actionNote: {ActionID: actionNote, Type: "plain_text_input", Value: note}},
			}},
		},
	}
}

// decide clicks a button, checks the modal opened and submits it.
func (e *env) decide(user string, p rulefmt.Proposal, action, note string) {
	e.t.Helper()
	msg := e.message(p.ID)
	v := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: action}
	views := len(e.ws.Views())
	if code, body := e.click(user, v, msg.TS); code != http.StatusOK {
		e.t.Fatalf("click by %s: %d %s", user, code, body)
	}
	eventually(e.t, "the note modal", func() bool { return len(e.ws.Views()) > views })
	if code, body := e.submit(user, v, msg.TS, note); code != http.StatusOK || body != "" {
		e.t.Fatalf("submit by %s: %d %q", user, code, body)
	}
	e.svc.wait()
}

// ephemeralsTo returns the ephemeral texts a user saw.
func (e *env) ephemeralsTo(user string) []string {
	var out []string
	for _, m := range e.ws.Ephemerals() {
		if m.User == user {
			out = append(out, m.Text)
		}
	}
	return out
}

// sawEphemeral waits for an ephemeral message to user containing want.
func (e *env) sawEphemeral(user, want string) {
	e.t.Helper()
	eventually(e.t, "an ephemeral message to "+user+" saying "+want, func() bool {
		for _, t := range e.ephemeralsTo(user) {
			if strings.Contains(t, want) {
				return true
			}
		}
		return false
	})
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bumpContent changes a proposal on its branch the way a content change
// does (revision and content revision up), so earlier buttons are stale.
func bumpContent(t *testing.T, repo *gitrepo.Repo, id string) {
	t.Helper()
	_, err := repo.Update(context.Background(), rulefmt.ProposalBranch(id), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		data, err := s.ReadFile(rulefmt.ProposalPath(id))
		if err != nil {
			return nil, err
		}
		p, err := rulefmt.ParseProposal(data)
		if err != nil {
			return nil, err
		}
		p.Revision++
		p.ContentRevision = p.Revision
		p.EvidenceSummary += " One more review agrees."
		out, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		return &gitrepo.CommitSpec{Message: "Add evidence to " + id, Changes: []gitrepo.Change{{Path: rulefmt.ProposalPath(id), Data: out}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// SetFeatures switches features at run time, as the tests need (preceptd
// sets them once, in Options). Turning posting on posts the pending
// proposals; turning clarification on asks about the waiting ambiguous
// decisions.
func (s *Service) SetFeatures(f Features) {
	s.featMu.Lock()
	s.features = f
	s.featMu.Unlock()
	s.post.reconcileSoon()
	if s.clarify != nil {
		s.clarify.scanSoon()
	}
}

// wait blocks until the work started so far is done (tests).
func (s *Service) wait() { s.work.Wait() }
