package slackapp

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/lib/fakeslack"
)

// curationFake stands in for the evaluator: two suggestions over four
// clusters, and a record of the corrections made. It refuses a
// correction naming a cluster already merged away, as the evaluator
// does.
type curationFake struct {
	mu       sync.Mutex
	sgs      []evaluator.Suggestion
	gone     map[string]bool
	recorded []evaluator.Correction
	fail     error
}

func newCurationFake() *curationFake {
	return &curationFake{gone: map[string]bool{}, sgs: []evaluator.Suggestion{
		{A: "c-1", B: "c-2", Agent: "coding-agent", Categories: [2]string{"errors-ignored", "errors-ignored"}, Similarity: 0.64, Why: "their members are 0.64 similar on average"},
		{A: "c-3", B: "c-4", Agent: "coding-agent", Categories: [2]string{"magic-values", "hardcoded-config"}, Similarity: 0.61, Why: "different categories"},
	}}
}

func (f *curationFake) SuggestMerges(context.Context, int) ([]evaluator.Suggestion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sgs), nil
}

func (f *curationFake) Cluster(_ context.Context, id string) (evaluator.ClusterView, error) {
	v := evaluator.ClusterView{Cluster: evaluator.Cluster{ID: id, Agent: "coding-agent", Category: "errors-ignored", Class: evaluator.GeneralizableLow, Size: 2,
		Reviewers: map[string]int{"r1": 1, "r2": 1}, Epics: map[string]int{"E1": 2}}}
	v.Representatives = []evaluator.Representative{{DecisionID: id + "-d1", Text: "comment of " + id}}
	return v, nil
}

func (f *curationFake) Correct(_ context.Context, c evaluator.Correction) (evaluator.Correction, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return evaluator.Correction{}, f.fail
	}
	for _, id := range c.Clusters {
		if f.gone[id] {
			return evaluator.Correction{}, precept.Errorf(precept.NotFound, "cluster %s", id)
		}
	}
	if c.Kind == evaluator.CorrectMerge {
		f.gone[c.Clusters[1]] = true
	}
	c.ID = "corr-" + string(rune('a'+len(f.recorded)))
	f.recorded = append(f.recorded, c)
	return c, nil
}

func (f *curationFake) corrections() []evaluator.Correction {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.recorded)
}

func (e *env) suggestionClick(user, msgTS, action, value string) (int, string) {
	e.t.Helper()
	cb := slack.InteractionCallback{
		Type:      slack.InteractionTypeBlockActions,
		User:      slack.User{ID: user},
		TriggerID: "trigger-" + user,
		Container: slack.Container{Type: "message", ChannelID: testChannel, MessageTs: msgTS},
		ActionCallback: slack.ActionCallbacks{BlockActions: []*slack.BlockAction{{
			ActionID: action, BlockID: blockSuggestion, Value: value, Type: "button",
		}}},
	}
	return e.do(fakeslack.Interaction("http://app/slack/interactions", testSecret, e.clock.Now(), cb))
}

func TestMergeSuggestionsArePostedOnceAndAnsweredAsCorrections(t *testing.T) {
	cur := newCurationFake()
	users := map[string]string{uAlice: "alice", uBob: "bob", uCarol: "carol", uVic: "vic"}
	roles := map[string]precept.Role{"alice": precept.RoleApprover, "bob": precept.RoleApprover, "carol": precept.RoleApprover, "vic": precept.RoleReader}
	e := newEnv(t, envConfig{noRun: true, curation: cur, opts: Options{SuggestMax: 5, Users: users, Roles: roles}})
	ctx := context.Background()
	if n := e.svc.suggest(ctx); n != 2 {
		t.Fatalf("posted %d suggestions, want 2", n)
	}
	if n := e.svc.suggest(ctx); n != 0 {
		t.Fatalf("posted %d suggestions again", n)
	}
	msgs := e.ws.TopLevel(testChannel)
	if len(msgs) != 2 {
		t.Fatalf("%d messages in the channel", len(msgs))
	}
	first := msgs[0]
	for _, want := range []string{"read like one problem", "`c-1`", "`c-2`", "comment of c-1", "comment of c-2", "errors-ignored", "0.64 similar"} {
		if !first.Shows(want) {
			t.Errorf("the suggestion does not show %q: %v", want, first.Strings())
		}
	}
	buttons := first.Buttons()
	if buttons[ActionMerge] == "" || buttons[ActionKeepApart] == "" {
		t.Fatalf("buttons = %v", buttons)
	}

	// Someone not mapped to precept cannot answer.
	if code, _ := e.suggestionClick(uMallory, first.TS, ActionMerge, buttons[ActionMerge]); code != http.StatusOK {
		t.Fatalf("mallory's click: %d", code)
	}
	e.sawEphemeral(uMallory, "not mapped")
	// Nor can a mapped reader: answering needs the approver role, as
	// CorrectClusters does over the API.
	if code, _ := e.suggestionClick(uVic, first.TS, ActionMerge, buttons[ActionMerge]); code != http.StatusOK {
		t.Fatalf("vic's click: %d", code)
	}
	e.sawEphemeral(uVic, "approver role")
	// A button whose value does not match its action is refused.
	if code, _ := e.suggestionClick(uAlice, first.TS, ActionKeepApart, buttons[ActionMerge]); code != http.StatusBadRequest {
		t.Fatalf("mismatched click: %d", code)
	}
	if code, _ := e.suggestionClick(uAlice, first.TS, ActionMerge, `{"a":"../x","b":"c-2","action":"merge_clusters"}`); code != http.StatusBadRequest {
		t.Fatalf("bad cluster id: %d", code)
	}
	e.svc.wait()
	if got := cur.corrections(); len(got) != 0 {
		t.Fatalf("refused clicks recorded %+v", got)
	}

	// Alice merges; Bob's later click finds it answered.
	if code, body := e.suggestionClick(uAlice, first.TS, ActionMerge, buttons[ActionMerge]); code != http.StatusOK {
		t.Fatalf("alice's click: %d %s", code, body)
	}
	e.svc.wait()
	if code, _ := e.suggestionClick(uBob, first.TS, ActionKeepApart, buttons[ActionKeepApart]); code != http.StatusOK {
		t.Fatal("bob's click was not acknowledged")
	}
	e.svc.wait()
	e.sawEphemeral(uBob, "already answered")
	got := cur.corrections()
	if len(got) != 1 || got[0].Kind != evaluator.CorrectMerge || got[0].By != "alice" || !slices.Equal(got[0].Clusters, []string{"c-1", "c-2"}) {
		t.Fatalf("corrections = %+v", got)
	}
	after, _ := e.ws.Message(testChannel, first.TS)
	if !after.Shows("Merged by alice") || len(after.Buttons()) != 0 {
		t.Fatalf("the answered suggestion still reads %v with buttons %v", after.Strings(), after.Buttons())
	}

	// A refused answer is told, and can be given again.
	second := msgs[1]
	cur.mu.Lock()
	cur.fail = precept.Errorf(precept.Invalid, "the clusters belong to different agents")
	cur.mu.Unlock()
	if code, _ := e.suggestionClick(uCarol, second.TS, ActionKeepApart, second.Buttons()[ActionKeepApart]); code != http.StatusOK {
		t.Fatal("carol's click was not acknowledged")
	}
	e.svc.wait()
	e.sawEphemeral(uCarol, "different agents")
	cur.mu.Lock()
	cur.fail = nil
	cur.mu.Unlock()
	e.clock.Advance(time.Second) // the same click again is a replay
	if code, _ := e.suggestionClick(uCarol, second.TS, ActionKeepApart, second.Buttons()[ActionKeepApart]); code != http.StatusOK {
		t.Fatal("carol's second click was not acknowledged")
	}
	e.svc.wait()
	got = cur.corrections()
	if len(got) != 2 || got[1].Kind != evaluator.CorrectKeepApart || got[1].By != "carol" {
		t.Fatalf("corrections = %+v", got)
	}
	if m, _ := e.ws.Message(testChannel, second.TS); !m.Shows("Kept apart by carol") {
		t.Fatalf("second suggestion reads %v", m.Strings())
	}
	if strings.Contains(e.logs.String(), testSecret) {
		t.Fatal("the signing secret reached the logs")
	}
}

func TestMergeSuggestionsArePostedOnScheduleWhilePostingIsOn(t *testing.T) {
	off := newEnv(t, envConfig{curation: newCurationFake(), opts: Options{SuggestEvery: 20 * time.Millisecond, Features: &Features{}}})
	time.Sleep(300 * time.Millisecond)
	off.stop()
	if n := len(off.ws.TopLevel(testChannel)); n != 0 {
		t.Fatalf("%d suggestions posted with posting off", n)
	}
	on := newEnv(t, envConfig{curation: newCurationFake(), opts: Options{SuggestEvery: 20 * time.Millisecond}})
	eventually(t, "the suggestions posted", func() bool { return len(on.ws.TopLevel(testChannel)) == 2 })
	time.Sleep(100 * time.Millisecond)
	if n := len(on.ws.TopLevel(testChannel)); n != 2 {
		t.Fatalf("%d messages after more scans, want the 2 suggestions once", n)
	}
}

func TestASuggestionClickWhereNoEvaluatorRunsIsToldNotDropped(t *testing.T) {
	e := newEnv(t, envConfig{noRun: true})
	v, err := SuggestionValue{A: "c-1", B: "c-2", Action: ActionMerge}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := e.suggestionClick(uAlice, "1800000000.000001", ActionMerge, v); code != http.StatusOK {
		t.Fatalf("click: %d", code)
	}
	e.svc.wait()
	e.sawEphemeral(uAlice, "does not run the evaluator")
}
