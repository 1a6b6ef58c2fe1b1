package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/evaluator"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/rules"
)

func TestOneProducerCannotForgeTheDiversityAHighClusterNeeds(t *testing.T) {
	const token = "pipeline-secret-0123456789"
	r := start(t, fmt.Sprintf(`
auth:
  tokens:
    - {name: pipeline, role: recorder, token: %s}
evaluator: {thresholds: {high_min_producers: 2}}
`, token))
	ctx := context.Background()
	client := feedbackClient(r.app.URL(), "connect", token)
	// One token invents three reviewers in two epics.
	for i, who := range []string{"ann", "ben", "cat", "ann"} {
		d := protoDecision(fmt.Sprintf("forged-%d", i))
		d.ReviewerId, d.EpicId = who, fmt.Sprint("EPIC-", i%2)
		d.ReviewerComment = "the retry loop swallows the context error; return it wrapped so callers see the timeout"
		if _, err := client.RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: d})); err != nil {
			t.Fatal(err)
		}
	}
	var ev evaluator.Evaluation
	eventually(t, "the forged decisions evaluated", 20*time.Second, func() bool {
		var err error
		ev, _, err = r.app.Evaluator.Evaluation(ctx, "forged-3")
		return err == nil && ev.ClusterID != ""
	})
	if ev.Class != evaluator.GeneralizableLow || ev.Stats.DistinctProducers != 1 || !strings.Contains(ev.Rationale, "2 distinct producers (it has 1: api:pipeline)") {
		t.Fatalf("one producer: class %s, stats %+v, rationale %q", ev.Class, ev.Stats, ev.Rationale)
	}
	rec, err := r.app.Feedback.Get(ctx, "forged-0")
	if err != nil || rec.Producer != "api:pipeline" {
		t.Fatalf("stored producer = %q, %v", rec.Producer, err)
	}
	got, err := client.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "forged-0"}))
	if err != nil || got.Msg.Feedback.GetProducer() != "api:pipeline" ||
		strings.Join(got.Msg.Feedback.GetEvaluation().GetClusterStats().GetProducers(), ",") != "api:pipeline" {
		t.Fatalf("GetFeedback: producer %q, evaluation stats %v, %v", got.Msg.Feedback.GetProducer(), got.Msg.Feedback.GetEvaluation().GetClusterStats(), err)
	}

	// The proposal drafted from the low cluster shows approvers that one
	// producer recorded all of it.
	eventually(t, "a proposal whose evidence names its producer", 30*time.Second, func() bool {
		r.app.Rules.Wake()
		ps, err := r.app.Rules.List(ctx, rules.ListFilter{})
		return err == nil && len(ps) == 1 && strings.Join(ps[0].Producers, ",") == "api:pipeline" &&
			strings.Contains(ps[0].EvidenceSummary, "Recorded by 1 producer: api:pipeline.")
	})

	// The same problem from the stream: a second producer.
	r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: decisions, Values: event("streamed-1", "reviewer_id", "dan",
		"reviewer_comment", "the retry loop swallows the context error; return it wrapped so callers see the timeout")})
	eventually(t, "the cluster to turn high with a second producer", 20*time.Second, func() bool {
		ev, _, err = r.app.Evaluator.Evaluation(ctx, "streamed-1")
		return err == nil && ev.Class == evaluator.GeneralizableHigh
	})
	if strings.Join(ev.Stats.Producers, ",") != "api:pipeline,stream:asdlc:events:hitl_decisions" {
		t.Fatalf("producers = %v", ev.Stats.Producers)
	}
}
