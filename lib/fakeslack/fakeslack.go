// Package fakeslack is a Slack workspace for tests: slack-go's slacktest
// server, extended through its Customize hook with the Web API methods
// precept calls (chat.postMessage, chat.update, chat.postEphemeral,
// chat.getPermalink, views.open, conversations.replies, reactions.add),
// recording what it was sent, with failures and delays on demand. It
// also signs requests exactly as Slack signs what it sends to an app.
package fakeslack

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"
)

// BotID is the bot user id of the messages precept posts.
const BotID = "B0PRECEPT"

// Token is the bot token the workspace accepts.
const Token = "xoxb-fake-precept-token"

// Message is a message posted to the workspace.
type Message struct {
	Channel   string
	TS        string
	ThreadTS  string
	User      string
	BotID     string
	Text      string
	Broadcast bool
	// Blocks is the message's Block Kit JSON, as last sent.
	Blocks string
	// Updates counts chat.update calls on the message.
	Updates int
}

// Strings returns every text and value in the message's blocks, and its
// fallback text: what a reader (or a button) sees.
func (m Message) Strings() []string {
	out := []string{m.Text}
	var v any
	if json.Unmarshal([]byte(m.Blocks), &v) == nil {
		collect(v, &out)
	}
	return out
}

// Shows reports whether any of the message's strings contains s.
func (m Message) Shows(s string) bool {
	return slices.ContainsFunc(m.Strings(), func(x string) bool { return strings.Contains(x, s) })
}

// Buttons returns the message's buttons by action id: their values.
func (m Message) Buttons() map[string]string {
	var blocks []map[string]any
	out := map[string]string{}
	if json.Unmarshal([]byte(m.Blocks), &blocks) != nil {
		return out
	}
	for _, b := range blocks {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			el, _ := e.(map[string]any)
			if el["type"] == "button" {
				id, _ := el["action_id"].(string)
				val, _ := el["value"].(string)
				out[id] = val
			}
		}
	}
	return out
}

func collect(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if s, ok := c.(string); ok && (k == "text" || k == "value") {
				*out = append(*out, s)
				continue
			}
			collect(c, out)
		}
	case []any:
		for _, c := range x {
			collect(c, out)
		}
	}
}

// Ephemeral is a message shown to one user.
type Ephemeral struct {
	Channel, User, ThreadTS, Text string
}

// View is a modal opened with views.open.
type View struct {
	TriggerID string
	View      slack.ModalViewRequest
}

// Reaction is an emoji added to a message.
type Reaction struct {
	Channel, TS, Name string
}

// Workspace is the fake Slack. Its zero value is not usable; call New.
type Workspace struct {
	srv *slacktest.Server

	mu         sync.Mutex
	seq        int
	messages   []*Message
	ephemerals []Ephemeral
	views      []View
	reactions  []Reaction
	calls      map[string]int
	fail       map[string]string
	failStatus map[string]int
	delay      map[string]time.Duration
}

// New starts a workspace, stopped when the test ends.
func New(t testing.TB) *Workspace {
	t.Helper()
	w := &Workspace{calls: map[string]int{}, fail: map[string]string{}, failStatus: map[string]int{}, delay: map[string]time.Duration{}}
	w.srv = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", w.wrap("chat.postMessage", w.postMessage))
		c.Handle("/chat.update", w.wrap("chat.update", w.update))
		c.Handle("/chat.postEphemeral", w.wrap("chat.postEphemeral", w.postEphemeral))
		c.Handle("/chat.getPermalink", w.wrap("chat.getPermalink", w.permalink))
		c.Handle("/views.open", w.wrap("views.open", w.openView))
		c.Handle("/conversations.replies", w.wrap("conversations.replies", w.replies))
		c.Handle("/reactions.add", w.wrap("reactions.add", w.addReaction))
	})
	w.srv.Start()
	t.Cleanup(w.srv.Stop)
	return w
}

// APIURL is the base URL to give slack.OptionAPIURL.
func (w *Workspace) APIURL() string { return w.srv.GetAPIURL() }

// Client returns a slack-go client of the workspace.
func (w *Workspace) Client() *slack.Client {
	return slack.New(Token, slack.OptionAPIURL(w.APIURL()), slack.OptionHTTPClient(&http.Client{Timeout: 10 * time.Second}))
}

// Fail makes method answer with Slack error code slackErr ("" stops).
func (w *Workspace) Fail(method, slackErr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slackErr == "" {
		delete(w.fail, method)
	} else {
		w.fail[method] = slackErr
	}
}

// FailStatus makes method answer with HTTP status code (0 stops): an
// outage (5xx) or a rate limit (429).
func (w *Workspace) FailStatus(method string, code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if code == 0 {
		delete(w.failStatus, method)
	} else {
		w.failStatus[method] = code
	}
}

// Delay makes method wait d before it answers.
func (w *Workspace) Delay(method string, d time.Duration) {
	w.mu.Lock()
	w.delay[method] = d
	w.mu.Unlock()
}

// Calls returns how often method was called (including failed calls).
func (w *Workspace) Calls(method string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[method]
}

// Messages returns the messages posted so far, in order.
func (w *Workspace) Messages() []Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Message, len(w.messages))
	for i, m := range w.messages {
		out[i] = *m
	}
	return out
}

// Message returns one message.
func (w *Workspace) Message(channel, ts string) (Message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := w.find(channel, ts); m != nil {
		return *m, true
	}
	return Message{}, false
}

// TopLevel returns the messages posted to channel outside threads.
func (w *Workspace) TopLevel(channel string) []Message {
	var out []Message
	for _, m := range w.Messages() {
		if m.Channel == channel && m.ThreadTS == "" {
			out = append(out, m)
		}
	}
	return out
}

// Thread returns the replies in a thread, oldest first.
func (w *Workspace) Thread(channel, root string) []Message {
	var out []Message
	for _, m := range w.Messages() {
		if m.Channel == channel && m.ThreadTS == root {
			out = append(out, m)
		}
	}
	return out
}

// Ephemerals returns the ephemeral messages shown so far.
func (w *Workspace) Ephemerals() []Ephemeral {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ephemerals)
}

// Views returns the modals opened so far.
func (w *Workspace) Views() []View {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.views)
}

// Reactions returns the reactions added so far.
func (w *Workspace) Reactions() []Reaction {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.reactions)
}

// Reply adds a person's reply to a thread, as if typed in Slack, and
// returns it; conversations.replies lists it.
func (w *Workspace) Reply(channel, root, user, text string) Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := &Message{Channel: channel, TS: w.nextTS(), ThreadTS: root, User: user, Text: text}
	w.messages = append(w.messages, m)
	return *m
}

func (w *Workspace) nextTS() string {
	w.seq++
	return fmt.Sprintf("1800000000.%06d", w.seq)
}

// find returns a message; the caller holds mu.
func (w *Workspace) find(channel, ts string) *Message {
	for _, m := range w.messages {
		if m.Channel == channel && m.TS == ts {
			return m
		}
	}
	return nil
}

// wrap counts a call, applies delays and injected failures, checks the
// token and parses the form.
func (w *Workspace) wrap(method string, h func(http.ResponseWriter, *http.Request, url.Values) any) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.calls[method]++
		d, slackErr, status := w.delay[method], w.fail[method], w.failStatus[method]
		w.mu.Unlock()
		if d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if status != 0 {
			if status == http.StatusTooManyRequests {
				rw.Header().Set("Retry-After", "1")
			}
			http.Error(rw, http.StatusText(status), status)
			return
		}
		body, _ := io.ReadAll(r.Body)
		values := r.URL.Query()
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			form, err := url.ParseQuery(string(body))
			if err != nil {
				answer(rw, map[string]any{"ok": false, "error": "invalid_form_data"})
				return
			}
			for k, v := range form {
				values[k] = v
			}
		} else if len(body) > 0 {
			values.Set("_json", string(body))
		}
		token := values.Get("token")
		if token == "" {
			token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if token != Token {
			answer(rw, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		if slackErr != "" {
			answer(rw, map[string]any{"ok": false, "error": slackErr})
			return
		}
		answer(rw, h(rw, r, values))
	}
}

func answer(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(v)
}

func (w *Workspace) postMessage(_ http.ResponseWriter, _ *http.Request, v url.Values) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	channel := v.Get("channel")
	if channel == "" {
		return map[string]any{"ok": false, "error": "channel_not_found"}
	}
	if v.Get("text") == "" && v.Get("blocks") == "" {
		return map[string]any{"ok": false, "error": "no_text"}
	}
	root := v.Get("thread_ts")
	if root != "" && w.find(channel, root) == nil {
		return map[string]any{"ok": false, "error": "thread_not_found"}
	}
	m := &Message{Channel: channel, TS: w.nextTS(), ThreadTS: root, BotID: BotID, Text: v.Get("text"), Blocks: v.Get("blocks"),
		Broadcast: v.Get("reply_broadcast") == "true"}
	w.messages = append(w.messages, m)
	return map[string]any{"ok": true, "channel": channel, "ts": m.TS, "message": map[string]any{"text": m.Text, "ts": m.TS, "bot_id": BotID}}
}

func (w *Workspace) update(_ http.ResponseWriter, _ *http.Request, v url.Values) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.find(v.Get("channel"), v.Get("ts"))
	if m == nil {
		return map[string]any{"ok": false, "error": "message_not_found"}
	}
	m.Text, m.Blocks = v.Get("text"), v.Get("blocks")
	m.Updates++
	return map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text}
}

func (w *Workspace) postEphemeral(_ http.ResponseWriter, _ *http.Request, v url.Values) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v.Get("channel") == "" || v.Get("user") == "" {
		return map[string]any{"ok": false, "error": "channel_not_found"}
	}
	w.ephemerals = append(w.ephemerals, Ephemeral{Channel: v.Get("channel"), User: v.Get("user"), ThreadTS: v.Get("thread_ts"), Text: v.Get("text")})
	return map[string]any{"ok": true, "message_ts": w.nextTS()}
}

func (w *Workspace) permalink(_ http.ResponseWriter, _ *http.Request, v url.Values) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.find(v.Get("channel"), v.Get("message_ts")) == nil {
		return map[string]any{"ok": false, "error": "message_not_found"}
	}
	return map[string]any{"ok": true, "channel": v.Get("channel"),
		"permalink": "https://fake.slack.test/archives/" + v.Get("channel") + "/p" + strings.ReplaceAll(v.Get("message_ts"), ".", "")}
}

func (w *Workspace) openView(_ http.ResponseWriter, _ *http.Request, v url.Values) any {
	var req struct {
		TriggerID string                 `json:"trigger_id"`
		View      slack.ModalViewRequest `json:"view"`
	}
	if err := json.Unmarshal([]byte(v.Get("_json")), &req); err != nil || req.TriggerID == "" {
		return map[string]any{"ok": false, "error": "invalid_arguments"}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.views = append(w.views, View{TriggerID: req.TriggerID, View: req.View})
	return map[string]any{"ok": true, "view": map[string]any{"id": fmt.Sprintf("V%06d", len(w.views)), "type": "modal"}}
}

func (w *Workspace) replies(_ http.ResponseWriter, _ *http.Request, v url.Values) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	channel, root := v.Get("channel"), v.Get("ts")
	rootMsg := w.find(channel, root)
	if rootMsg == nil {
		return map[string]any{"ok": false, "error": "thread_not_found"}
	}
	var msgs []map[string]any
	for _, m := range w.messages {
		if m.Channel == channel && (m.TS == root || m.ThreadTS == root) {
			msg := map[string]any{"type": "message", "ts": m.TS, "thread_ts": root, "text": m.Text}
			if m.User != "" {
				msg["user"] = m.User
			}
			if m.BotID != "" {
				msg["bot_id"] = m.BotID
			}
			msgs = append(msgs, msg)
		}
	}
	return map[string]any{"ok": true, "messages": msgs, "has_more": false}
}

func (w *Workspace) addReaction(_ http.ResponseWriter, _ *http.Request, v url.Values) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.find(v.Get("channel"), v.Get("timestamp")) == nil {
		return map[string]any{"ok": false, "error": "message_not_found"}
	}
	w.reactions = append(w.reactions, Reaction{Channel: v.Get("channel"), TS: v.Get("timestamp"), Name: v.Get("name")})
	return map[string]any{"ok": true}
}

// Sign returns the headers Slack sends with a request body at time at:
// X-Slack-Request-Timestamp and X-Slack-Signature, "v0=" and the hex
// HMAC-SHA256 of "v0:<timestamp>:<body>" keyed with the signing secret.
func Sign(secret string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// Request builds a request to an app endpoint, signed at time at.
func Request(target, secret string, at time.Time, contentType string, body []byte) *http.Request {
	r, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	r.Header.Set("Content-Type", contentType)
	for k, v := range Sign(secret, at, body) {
		r.Header[k] = v
	}
	return r
}

// InteractionBody is the form body Slack posts for an interaction:
// payload=<JSON>.
func InteractionBody(cb slack.InteractionCallback) []byte {
	b, err := json.Marshal(&cb)
	if err != nil {
		panic(err)
	}
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

// Interaction builds a signed interactivity request.
func Interaction(target, secret string, at time.Time, cb slack.InteractionCallback) *http.Request {
	return Request(target, secret, at, "application/x-www-form-urlencoded", InteractionBody(cb))
}

// Event builds a signed Events API request.
func Event(target, secret string, at time.Time, event any) *http.Request {
	b, err := json.Marshal(event)
	if err != nil {
		panic(err)
	}
	return Request(target, secret, at, "application/json", b)
}
