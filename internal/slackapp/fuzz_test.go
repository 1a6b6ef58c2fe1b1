package slackapp

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
)

// FuzzInteractionPayload sends arbitrary bytes, correctly signed, to the
// interactivity endpoint: as the form's payload, or as the whole body.
// Whatever they hold, the answer is 200 or a 4xx — a signed request is
// never the server's fault — and nothing panics, in the handler or in
// the work it starts after answering.
func FuzzInteractionPayload(f *testing.F) {
	clock := newClock()
	logs := &testenv.SyncBuffer{}
	repo, err := gitrepo.Open(filepath.Join(f.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { repo.Close() })
	m, err := rules.New(repo, rules.Options{})
	if err != nil {
		f.Fatal(err)
	}
	p, err := m.Propose(context.Background(), rules.ManualProposal{
		Agents: []string{"coding-agent"}, Content: "Check every error a deferred Close returns.", Rationale: "Seen in reviews.",
	}, precept.Identity{Name: "erin", Role: precept.RoleApprover})
	if err != nil {
		f.Fatal(err)
	}
	svc, err := New(quietAPI{}, m, NewPosts(repo, m, clock.Now, nil), nil, NewMemoryStore(clock.Now), Options{
		Channel: testChannel, SigningSecret: testSecret, Now: clock.Now,
		Users: map[string]string{uAlice: "alice", uBob: "bob"},
		Roles: map[string]precept.Role{"alice": precept.RoleApprover},
		// Panics in work started after the answer are logged as errors;
		// nothing below that level is kept, so the check stays cheap.
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(svc.shutdown)
	handler := svc.Interactions()

	v := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: ActionApprove}
	for _, cb := range [][]byte{
		fakeslack.InteractionBody(clickPayload(uAlice, v, "1700000000.000100")),
		fakeslack.InteractionBody(clickPayload(uBob, v, "1700000000.000100")),
		fakeslack.InteractionBody(submitPayload(uAlice, v, "1700000000.000100", "fine")),
	} {
		form, err := url.ParseQuery(string(cb))
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(form.Get("payload")), true)
		f.Add(cb, false)
	}
	f.Add([]byte(`{"type":"view_submission","view":{"callback_id":"precept_note","private_metadata":"{}","state":null}}`), true)
	f.Add([]byte(`{"type":"block_actions","actions":[null,{"block_id":"precept_decision"}]}`), true)
	f.Add([]byte("payload=%7B%22type%22%3A"), false)
	f.Add([]byte{0xff, 0xfe, '=', '&', '%'}, false)

	f.Fuzz(func(t *testing.T, data []byte, asPayload bool) {
		body := data
		if asPayload {
			body = []byte("payload=" + url.QueryEscape(string(data)))
		}
		req := fakeslack.Request("http://app/slack/interactions", testSecret, clock.Now(), "application/x-www-form-urlencoded", body)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && (rec.Code < 400 || rec.Code > 499) {
			t.Fatalf("signed request answered %d %q", rec.Code, rec.Body.String())
		}
		svc.wait()
		if strings.Contains(logs.String(), "panicked") {
			t.Fatalf("work started by the request panicked:\n%s", logs.String())
		}
	})
}

// quietAPI answers every Slack Web API call at once with success, so the
// fuzzer spends its budget on the payloads rather than on HTTP to a fake
// workspace.
type quietAPI struct{}

var _ API = quietAPI{}

func (quietAPI) PostMessageContext(context.Context, string, ...slack.MsgOption) (string, string, error) {
	return testChannel, "1700000000.000100", nil
}

func (quietAPI) UpdateMessageContext(context.Context, string, string, ...slack.MsgOption) (string, string, string, error) {
	return testChannel, "1700000000.000100", "", nil
}

func (quietAPI) PostEphemeralContext(context.Context, string, string, ...slack.MsgOption) (string, error) {
	return "1700000000.000200", nil
}

func (quietAPI) OpenViewContext(context.Context, string, slack.ModalViewRequest) (*slack.ViewResponse, error) {
	return &slack.ViewResponse{}, nil
}

func (quietAPI) GetPermalinkContext(context.Context, *slack.PermalinkParameters) (string, error) {
	return "https://example.slack.com/archives/C0RULES/p1700000000000100", nil
}

func (quietAPI) GetConversationRepliesContext(context.Context, *slack.GetConversationRepliesParameters) ([]slack.Message, bool, string, error) {
	return nil, false, "", nil
}

func (quietAPI) AddReactionContext(context.Context, string, slack.ItemRef) error { return nil }
