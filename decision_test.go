package precept

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const validJSON = `{"decision_id":"d-1","gate_id":"HITL-2","epic_id":"E-1","agent":"coding-agent",
"decision":"REJECTED","reviewer_id":"alice","timestamp":"2026-11-20T10:00:00Z",
"reviewer_comment":"missing tests","tags":["Tests"," style "],"quality_scores":{"accuracy":40}}`

func parseValid(t *testing.T, mutate func(m map[string]any)) error {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(validJSON), &m); err != nil {
		t.Fatal(err)
	}
	mutate(m)
	b, _ := json.Marshal(m)
	d, err := ParseDecisionJSON(b)
	if err != nil {
		return err
	}
	return d.Validate(Limits{}, now)
}

func TestAValidEventParsesAndNormalizes(t *testing.T) {
	d, err := ParseDecisionJSON([]byte(validJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(Limits{}, now); err != nil {
		t.Fatal(err)
	}
	if strings.Join(d.Tags, ",") != "style,tests" {
		t.Fatalf("tags = %v, want lower-cased, trimmed, sorted", d.Tags)
	}
	if d.Timestamp != time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC) || d.Decision != Rejected {
		t.Fatalf("decision = %+v", d)
	}
}

func TestInvalidEventsNameTheFieldAtFault(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		field  string
	}{
		{"missing decision_id", func(m map[string]any) { delete(m, "decision_id") }, "decision_id: required"},
		{"blank decision_id", func(m map[string]any) { m["decision_id"] = "   " }, "decision_id: required"},
		{"decision_id with a slash", func(m map[string]any) { m["decision_id"] = "a/b" }, "decision_id: must start"},
		{"decision_id too long", func(m map[string]any) { m["decision_id"] = strings.Repeat("x", 200) }, "decision_id: longer"},
		{"missing gate", func(m map[string]any) { delete(m, "gate_id") }, "gate_id: required"},
		{"missing epic", func(m map[string]any) { delete(m, "epic_id") }, "epic_id: required"},
		{"missing agent", func(m map[string]any) { delete(m, "agent") }, "agent: required"},
		{"agent with spaces", func(m map[string]any) { m["agent"] = "coding agent" }, "agent: must start"},
		{"missing verdict", func(m map[string]any) { delete(m, "decision") }, "decision: required"},
		{"unknown verdict", func(m map[string]any) { m["decision"] = "MAYBE" }, `decision: must be APPROVED, REJECTED or APPROVED_WITH_CHANGES, got "MAYBE"`},
		{"missing reviewer", func(m map[string]any) { delete(m, "reviewer_id") }, "reviewer_id: required"},
		{"missing timestamp", func(m map[string]any) { delete(m, "timestamp") }, "timestamp: required"},
		{"bad timestamp", func(m map[string]any) { m["timestamp"] = "yesterday" }, "timestamp: not an RFC 3339 timestamp"},
		{"future timestamp", func(m map[string]any) { m["timestamp"] = "2027-01-01T00:00:00Z" }, "timestamp: more than"},
		{"ancient timestamp", func(m map[string]any) { m["timestamp"] = "1970-01-01T00:00:00Z" }, "timestamp: before the year 2000"},
		{"negative duration", func(m map[string]any) { m["review_duration_seconds"] = -3 }, "review_duration_seconds: must not be negative"},
		{"fractional duration", func(m map[string]any) { m["review_duration_seconds"] = 1.5 }, "review_duration_seconds: wrong type"},
		{"oversized comment", func(m map[string]any) { m["reviewer_comment"] = strings.Repeat("x", 20000) }, "reviewer_comment: 20000 bytes"},
		{"comment with NUL", func(m map[string]any) { m["reviewer_comment"] = "a\x00b" }, "reviewer_comment: contains a NUL"},
		{"oversized diff", func(m map[string]any) { m["correction_diff"] = strings.Repeat("x", 300<<10) }, "correction_diff:"},
		{"unknown field", func(m map[string]any) { m["severity"] = "high" }, "severity: unknown field"},
		{"tags not a list", func(m map[string]any) { m["tags"] = "tests" }, "tags: wrong type"},
		{"bad tag", func(m map[string]any) { m["tags"] = []string{"has space"} }, "tags: entry"},
		{"too many tags", func(m map[string]any) {
			var tags []string
			for i := range 40 {
				tags = append(tags, strings.Repeat("t", i+1))
			}
			m["tags"] = tags
		}, "tags: 40 entries"},
		{"bad rating", func(m map[string]any) { m["rating"] = "meh" }, "rating: must be positive"},
		{"score out of range", func(m map[string]any) { m["quality_scores"] = map[string]int{"accuracy": 140} }, "quality_scores: accuracy is 140"},
		{"scope path escapes", func(m map[string]any) { m["scope_path"] = "src/../../etc" }, "scope_path: must not contain .."},
		{"absolute scope path", func(m map[string]any) { m["scope_path"] = "/etc/passwd" }, "scope_path: must be relative"},
		{"unclean diff path", func(m map[string]any) { m["correction_diff_path"] = "a//b" }, "correction_diff_path: must be a clean path"},
		{"bad sha", func(m map[string]any) { m["agent_output_sha"] = "not a sha!" }, "agent_output_sha:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := parseValid(t, tt.mutate)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not contain %q", err, tt.field)
			}
			if ErrorCode(err) != Invalid {
				t.Fatalf("code %s, want invalid", ErrorCode(err))
			}
		})
	}
}

// TestEventJSONIsDecodedStrictly runs the table every JSON path shares
// (testdata/strict-decoding.json): exact key names, no duplicate keys, no
// unknown fields, and errors that say what is wrong.
func TestEventJSONIsDecodedStrictly(t *testing.T) {
	for _, c := range testenv.DecodingCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			d, err := ParseDecisionJSON(c.Event)
			if err == nil {
				err = d.Validate(Limits{}, now)
			}
			switch {
			case c.Error == "" && err != nil:
				t.Fatalf("%s: %v", c.Event, err)
			case c.Error != "" && err == nil:
				t.Fatalf("%s accepted, want %q", c.Event, c.Error)
			case c.Error != "" && !strings.Contains(err.Error(), c.Error):
				t.Fatalf("%s: error %q does not say %q", c.Event, err, c.Error)
			}
		})
	}
}

func TestMalformedJSONIsRejectedWithAReason(t *testing.T) {
	tests := map[string]string{
		"not UTF-8":     "{\"decision_id\":\"\xff\"}",
		"not an object": `["a"]`,
		"truncated":     `{"decision_id":"d`,
		"trailing data": `{"decision_id":"d"} {"x":1}`,
		"empty":         ``,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDecisionJSON([]byte(in))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a ValidationError", err)
			}
		})
	}
}

func TestAllProblemsAreReportedAtOnce(t *testing.T) {
	d := Decision{Decision: "NOPE"}
	err := d.Validate(Limits{}, now)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) < 6 {
		t.Fatalf("problems = %v", err)
	}
}

func TestGateAgentsFillAMissingAgent(t *testing.T) {
	d := Decision{DecisionID: "d", GateID: "HITL-3", EpicID: "e", Decision: Approved, ReviewerID: "r", Timestamp: now}
	if err := d.Validate(Limits{GateAgents: map[string]string{"HITL-3": "test-agent"}}, now); err != nil {
		t.Fatal(err)
	}
	if d.Agent != "test-agent" {
		t.Fatalf("agent = %q", d.Agent)
	}
}

func TestEditDistancePercent(t *testing.T) {
	tests := []struct {
		a, b string
		want int32
	}{
		{"same", "same", 0},
		{"abcd", "wxyz", 100},
		{"hello world", "hello there world", 35},
		{"", "new", 100},
	}
	for _, tt := range tests {
		if got := EditDistancePercent(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistancePercent(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	// Large and adversarial inputs stay cheap.
	start := time.Now()
	EditDistancePercent(strings.Repeat("ab", 128<<10), strings.Repeat("ba", 128<<10))
	EditDistancePercent(strings.Repeat("a\n", 100<<10), strings.Repeat("b\n", 100<<10))
	EditDistancePercent(strings.Repeat("x", 2048), strings.Repeat("y", 2048))
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("edit distance on large outputs took %s", took)
	}
	// Above 2 KiB the diff is by line: one changed 100-character line of
	// 2707 characters in all, counted on both sides, is 202/2707 ≈ 7%.
	same := strings.Repeat("same\n", 500)
	if got := EditDistancePercent("keep\n"+strings.Repeat("A", 100)+"\n"+same, "keep\n"+strings.Repeat("B", 100)+"\n"+same); got != 7 {
		t.Errorf("line-level edit distance = %d, want 7", got)
	}
}

func TestEmbeddingTextJoinsCorrectionSummaryAndComment(t *testing.T) {
	d := Decision{
		ReviewerComment: "  use the retry helper ",
		CorrectionDiff:  "--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-for i := 0; i < 3; i++ {\n+retry.Do(func() error {\n",
	}
	got := EmbeddingText(d)
	want := "-for i := 0; i < 3; i++ {\n+retry.Do(func() error {\nuse the retry helper"
	if got != want {
		t.Fatalf("EmbeddingText = %q", got)
	}
}

func FuzzParseDecisionJSON(f *testing.F) {
	f.Add([]byte(validJSON))
	f.Add([]byte(`{"decision_id":"x","timestamp":"2026-13-45T99:00:00Z"}`))
	f.Add([]byte(`{"quality_scores":{"a":1e99}}`))
	f.Add([]byte(`{"tags":[1,2]}`))
	f.Add([]byte("{\"agent\":\"\xc3\x28\"}"))
	f.Add([]byte(`{"decision_id":"a","DECISION_ID":"b","quality_scores":{"a":1,"a":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDecisionJSON(data)
		if err != nil {
			if ErrorCode(err) != Invalid {
				t.Fatalf("parse error with code %s: %v", ErrorCode(err), err)
			}
			return
		}
		if err := d.Validate(Limits{}, now); err != nil {
			return
		}
		// What validates must survive the round trip through the stored form.
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseDecisionJSON(b)
		if err != nil {
			t.Fatalf("re-parse of a valid decision: %v", err)
		}
		if err := again.Validate(Limits{}, now); err != nil {
			t.Fatalf("re-validate: %v", err)
		}
	})
}

func TestProducerNameOfRecordsStoredBeforeProducers(t *testing.T) {
	for _, tt := range []struct {
		f    Feedback
		want string
	}{
		{Feedback{Producer: "stream:hitl", Source: "stream:1-0"}, "stream:hitl"},
		{Feedback{Source: "api:pipeline"}, "api:pipeline"},
		// The stream's name was not kept: unknown, so it cannot count as
		// a second producer beside "stream:<name>".
		{Feedback{Source: "stream:1-0"}, ""},
		{Feedback{Source: "dry-run"}, ""},
	} {
		if got := tt.f.ProducerName(); got != tt.want {
			t.Errorf("ProducerName(%+v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}
