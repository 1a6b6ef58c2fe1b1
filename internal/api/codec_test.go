package api

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

func TestStrictJSONAcceptsPlainAndFullEnumNamesInAnyCase(t *testing.T) {
	c := strictJSON{name: "json"}
	tests := []struct {
		json string
		msg  proto.Message
		want proto.Message
	}{
		{`{"decision":{"decision":"REJECTED"}}`, &preceptv1.RecordFeedbackRequest{},
			&preceptv1.RecordFeedbackRequest{Decision: &preceptv1.HITLDecision{Decision: preceptv1.Verdict_VERDICT_REJECTED}}},
		{`{"decision":{"decision":"approved_with_changes"}}`, &preceptv1.EvaluateRequest{},
			&preceptv1.EvaluateRequest{Decision: &preceptv1.HITLDecision{Decision: preceptv1.Verdict_VERDICT_APPROVED_WITH_CHANGES}}},
		{`{"decision":{"decision":"VERDICT_APPROVED"}}`, &preceptv1.RecordFeedbackRequest{},
			&preceptv1.RecordFeedbackRequest{Decision: &preceptv1.HITLDecision{Decision: preceptv1.Verdict_VERDICT_APPROVED}}},
		{`{"decision":{"decision":2}}`, &preceptv1.RecordFeedbackRequest{},
			&preceptv1.RecordFeedbackRequest{Decision: &preceptv1.HITLDecision{Decision: preceptv1.Verdict_VERDICT_REJECTED}}},
		{`{"status":"pending","agent":"coder"}`, &preceptv1.ListProposalsRequest{},
			&preceptv1.ListProposalsRequest{Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING, Agent: "coder"}},
		{`{"ruleType":"GUIDELINE","affected_agents":["coder"]}`, &preceptv1.ProposeRuleRequest{},
			&preceptv1.ProposeRuleRequest{RuleType: preceptv1.RuleType_RULE_TYPE_GUIDELINE, AffectedAgents: []string{"coder"}}},
	}
	for _, tt := range tests {
		if err := c.Unmarshal([]byte(tt.json), tt.msg); err != nil {
			t.Errorf("%s: %v", tt.json, err)
			continue
		}
		if !proto.Equal(tt.msg, tt.want) {
			t.Errorf("%s decoded as %v, want %v", tt.json, tt.msg, tt.want)
		}
	}
}

func TestStrictJSONAcceptsProtoAndJSONNamesAndWellKnownTypes(t *testing.T) {
	var got preceptv1.RecordFeedbackRequest
	in := `{"decision":{"decisionId":"d-1","reviewer_comment":"ok","timestamp":"2026-04-30T10:00:00Z",
		"reviewDurationSeconds":"95","qualityScores":{"clarity":40},"tags":["a","b"]}}`
	if err := (strictJSON{}).Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	d := got.GetDecision()
	if d.GetDecisionId() != "d-1" || d.GetReviewerComment() != "ok" || d.GetTimestamp().GetSeconds() == 0 ||
		d.GetReviewDurationSeconds() != 95 || d.GetQualityScores()["clarity"] != 40 || len(d.GetTags()) != 2 {
		t.Fatalf("decoded %v", d)
	}
}

func TestStrictJSONRefusesWhatTheDefaultCodecDropsOrGuesses(t *testing.T) {
	tests := []struct {
		name string
		json string
		msg  proto.Message
		want string
	}{
		{"a misspelt nested field", `{"decision":{"reviewer_coment":"x"}}`, &preceptv1.RecordFeedbackRequest{},
			"decision.reviewer_coment: unknown field"},
		{"a misspelt top-level field", `{"decisoin":{}}`, &preceptv1.RecordFeedbackRequest{}, "decisoin: unknown field"},
		{"a case variant", `{"Agent":"coder"}`, &preceptv1.ListProposalsRequest{},
			"Agent: unknown field (names are case-sensitive: did you mean agent?)"},
		{"a key given twice", `{"agent":"a","agent":"b"}`, &preceptv1.ListProposalsRequest{}, "agent: duplicate field"},
		{"a key given as both names", `{"decision":{"decision_id":"a","decisionId":"b"}}`, &preceptv1.RecordFeedbackRequest{},
			"decision.decision_id: duplicate field (given as decision_id and decisionId)"},
		{"a duplicate map key", `{"decision":{"quality_scores":{"a":1,"a":2}}}`, &preceptv1.RecordFeedbackRequest{},
			`decision.quality_scores: duplicate key "a"`},
		{"an unknown enum name", `{"status":"OPEN"}`, &preceptv1.ListProposalsRequest{},
			`status: must be PENDING, APPROVED, REJECTED, BLOCKED, DEFERRED or MERGED, got "OPEN"`},
		{"an unknown verdict", `{"decision":{"decision":"MAYBE"}}`, &preceptv1.RecordFeedbackRequest{},
			`decision.decision: must be APPROVED, REJECTED or APPROVED_WITH_CHANGES, got "MAYBE"`},
		{"trailing data", `{"agent":"a"} {"agent":"b"}`, &preceptv1.ListProposalsRequest{}, "data after the JSON object"},
		{"invalid UTF-8", "{\"agent\":\"\xff\"}", &preceptv1.ListProposalsRequest{}, "not valid UTF-8"},
		{"a wrong type", `{"page_size":"many"}`, &preceptv1.ListProposalsRequest{}, "invalid value for int32 field pageSize"},
		{"an empty body", ``, &preceptv1.ListProposalsRequest{}, "empty body"},
		{"not an object", `["agent"]`, &preceptv1.ListProposalsRequest{}, "proto:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (strictJSON{}).Unmarshal([]byte(tt.json), tt.msg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Unmarshal(%s) = %v, want an error saying %q", tt.json, err, tt.want)
			}
		})
	}
}

func TestStrictJSONWritesWhatTheDefaultCodecWrites(t *testing.T) {
	m := &preceptv1.RecordFeedbackResponse{DecisionId: "d-1", Created: true,
		Feedback: &preceptv1.Feedback{Decision: &preceptv1.HITLDecision{Decision: preceptv1.Verdict_VERDICT_REJECTED}}}
	got, err := (strictJSON{}).Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := protojson.Marshal(m)
	if string(got) != string(want) {
		t.Fatalf("Marshal = %s, want %s", got, want)
	}
}

// FuzzStrictJSON: no input panics the codec, and what it accepts reads
// back the same after the default codec writes it.
func FuzzStrictJSON(f *testing.F) {
	f.Add([]byte(`{"decision":{"decision_id":"d-1","decision":"rejected","timestamp":"2026-04-30T10:00:00Z","quality_scores":{"a":1}}}`))
	f.Add([]byte(`{"decision":{"decision_id":"a","decisionId":"b"}}`))
	f.Add([]byte(`{"decision":{"tags":["a",null],"review_duration_seconds":"12"}}`))
	f.Add([]byte(`{"decision":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m preceptv1.RecordFeedbackRequest
		if err := (strictJSON{}).Unmarshal(data, &m); err != nil {
			return
		}
		out, err := protojson.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		var again preceptv1.RecordFeedbackRequest
		if err := (strictJSON{}).Unmarshal(out, &again); err != nil {
			t.Fatalf("re-reading %s: %v", out, err)
		}
		if !proto.Equal(&m, &again) {
			t.Fatalf("%s read back as %v, want %v", out, &again, &m)
		}
	})
}

// BenchmarkStrictJSONLargeDecision decodes a decision with three 256 KiB
// texts: with the verdict's full name protojson alone reads it; with its
// plain name the body is walked and rewritten first.
func BenchmarkStrictJSONLargeDecision(b *testing.B) {
	big := strings.Repeat("x", 256<<10)
	for _, verdict := range []string{"VERDICT_REJECTED", "REJECTED"} {
		b.Run(verdict, func(b *testing.B) {
			in := []byte(`{"decision":{"decision_id":"d-1","decision":"` + verdict + `","agent_output":"` + big +
				`","approved_output":"` + big + `","correction_diff":"` + big + `","tags":["a","b"]}}`)
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				var m preceptv1.RecordFeedbackRequest
				if err := (strictJSON{}).Unmarshal(in, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
