package app

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/precept-dev/precept/lib/testenv"
)

// connectJSON posts body to a procedure as a Connect unary JSON call and
// returns the HTTP status and the decoded answer (the response message,
// or the error's code and message).
func connectJSON(t *testing.T, base, procedure, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+procedure, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s answered %d with %q: %v", procedure, resp.StatusCode, b, err)
	}
	return resp.StatusCode, out
}

const recordFeedback = "/precept.v1.FeedbackService/RecordFeedback"

// TestConnectJSONDecodesEventsLikeTheStream holds RecordFeedback over
// Connect JSON to the table the stream and the CLI are held to
// (testdata/strict-decoding.json): a misspelt field is refused rather than
// dropped, case variants and duplicate keys are errors, plain verdict
// names are accepted and a zero timestamp is named as such.
func TestConnectJSONDecodesEventsLikeTheStream(t *testing.T) {
	r := start(t, "")
	for _, c := range testenv.DecodingCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			status, resp := connectJSON(t, r.app.URL(), recordFeedback, "", `{"decision":`+string(c.Event)+`}`)
			msg, _ := resp["message"].(string)
			switch {
			case c.Error == "" && status != http.StatusOK:
				t.Fatalf("%s: %d %v", c.Event, status, resp)
			case c.Error != "" && status == http.StatusOK:
				t.Fatalf("%s accepted (%v), want %q", c.Event, resp, c.Error)
			case c.Error != "" && (resp["code"] != "invalid_argument" || !strings.Contains(msg, c.Error)):
				t.Fatalf("%s: %d %v, want invalid_argument saying %q", c.Event, status, resp, c.Error)
			}
		})
	}
}

// TestConnectJSONRefusesAMisspeltFieldInsteadOfDroppingIt: with the enum's
// full name the rest of the event is valid, so Connect's default codec
// stored the decision without its comment.
func TestConnectJSONRefusesAMisspeltFieldInsteadOfDroppingIt(t *testing.T) {
	r := start(t, "")
	event := `{"decision":{"decision_id":"typo-1","gate_id":"HITL-2","epic_id":"EPIC-7","agent":"coding-agent",
		"decision":"VERDICT_REJECTED","reviewer_id":"alice","timestamp":"2026-04-30T10:00:00Z",
		"reviewer_coment":"please add unit tests"}}`
	status, resp := connectJSON(t, r.app.URL(), recordFeedback, "", event)
	msg, _ := resp["message"].(string)
	if status != http.StatusBadRequest || resp["code"] != "invalid_argument" || !strings.Contains(msg, "decision.reviewer_coment: unknown field") {
		t.Fatalf("RecordFeedback with reviewer_coment = %d %v, want invalid_argument naming decision.reviewer_coment", status, resp)
	}
	if _, err := r.app.Feedback.Get(t.Context(), "typo-1"); err == nil {
		t.Fatal("the decision was stored without its comment")
	}
}
