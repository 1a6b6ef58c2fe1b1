package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestShowPrintsTheImpactPreview(t *testing.T) {
	im := &preceptv1.ImpactPreview{
		Category:          "retry-timeout",
		Cluster:           &preceptv1.ImpactCounts{Total: 3, ByAgent: map[string]int64{"coder": 3}, ByEpic: map[string]int64{"E1": 1, "E2": 2}},
		CategoryNegatives: &preceptv1.ImpactCounts{Total: 40, ByAgent: map[string]int64{"coder": 40}, ByEpic: map[string]int64{"E1": 1, "E2": 2, "E3": 1}, Epics: 30, OtherEpics: 36},
		ApprovalsInScope:  3,
		OverCorrect:       &preceptv1.ImpactCounts{Total: 1, ByAgent: map[string]int64{"coder": 1}, ByEpic: map[string]int64{"E1": 1}},
		Scope:             &preceptv1.ImpactScope{Agents: []string{"coder"}, Gates: []string{"HITL-2"}, PathPrefixes: []string{"src/api"}},
		Similar:           []*preceptv1.ImpactSimilar{{Kind: "base_prompt", Path: "prompts/review.md", Similarity: 0.8, Opposing: true, Excerpt: "Never set a timeout\x1b[2J"}},
		Replay: &preceptv1.ImpactReplay{State: preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_DONE, Model: "openai/judge", Precision: 0.667, PrecisionN: 3,
			Recall: 1, RecallN: 2, Calls: 4, Malformed: 1},
		FeedbackSeq: 42, SimilarLeftOut: 12,
	}
	var buf bytes.Buffer
	printImpact(&buf, im)
	out := buf.String()
	for _, want := range []string{
		"Impact (at feedback position 42",
		"category     retry-timeout",
		"cluster      3 negatives (coder 3; 2 epics)",
		"addresses    40 negatives (coder 40; 30 epics) in the category",
		"overcorrect  1 approval (coder 1; 1 epic) of 3 in scope (agents coder; gates HITL-2; paths src/api)",
		"replay       precision 0.67 (n=3) recall 1.00 (n=2); 4 calls by openai/judge, without a verdict: 1 malformed, 0 timed out, 0 failed",
		"OPPOSITE base_prompt prompts/review.md (0.80): Never set a timeout\\x1b[2J",
		"12 passages on main not compared (cap reached)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("impact lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	printImpact(&buf, &preceptv1.ImpactPreview{Pending: true})
	if !strings.Contains(buf.String(), "pending") {
		t.Errorf("a pending preview shows %q", buf.String())
	}
	retry := timestamppb.New(time.Date(2026, 11, 26, 10, 40, 0, 0, time.UTC))
	for _, tc := range []struct {
		replay *preceptv1.ImpactReplay
		want   string
	}{
		{&preceptv1.ImpactReplay{State: preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_PENDING, Attempts: 2, RetryAt: retry},
			"pending: 2 failed (LLM unavailable), retry at 2026-11-26T10:40:00Z"},
		{&preceptv1.ImpactReplay{State: preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_PENDING, RetryAt: retry},
			"pending: call budget spent until 2026-11-26T10:40:00Z"},
	} {
		if got := replayLine(tc.replay); got != tc.want {
			t.Errorf("replay line %q, want %q", got, tc.want)
		}
	}
}
