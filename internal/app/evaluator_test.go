package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/feedbackstore"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/testenv"
)

// fixtureEvents reads the labelled fixture as stream entries (the `data`
// encoding) with their expected classes.
func fixtureEvents(t *testing.T) (entries []map[string]any, expected map[string]string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "feedback", "labelled.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	expected = map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		expected[m["decision_id"].(string)] = m["expected_class"].(string)
		delete(m, "cluster")
		delete(m, "expected_class")
		delete(m, "category")
		b, _ := json.Marshal(m)
		entries = append(entries, map[string]any{"data": string(b)})
	}
	return entries, expected
}

func xaddAll(t *testing.T, rdb *redis.Client, entries []map[string]any) {
	t.Helper()
	pipe := rdb.Pipeline()
	for _, e := range entries {
		pipe.XAdd(context.Background(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: e})
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func evaluatorClient(base, protocol string) preceptv1connect.EvaluatorServiceClient {
	var opts []connect.ClientOption
	if protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
	}
	return preceptv1connect.NewEvaluatorServiceClient(protocols(base, "")[protocol], base, opts...)
}

func TestIngestedDecisionsAreClassifiedAndServedOverBothProtocols(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()
	entries, expected := fixtureEvents(t)
	xaddAll(t, r.rdb, entries)
	ev := evaluatorClient(r.app.URL(), "connect")
	last := entries[len(entries)-1]["data"].(string)
	var lastID struct {
		DecisionID string `json:"decision_id"`
	}
	json.Unmarshal([]byte(last), &lastID)
	// Decisions are numbered in commit order and, within a commit, by the
	// time precept received them, then by id: entries read in one batch
	// share that time to the millisecond, so the last one sent may be
	// evaluated before others. Wait for every one.
	eventually(t, "every decision evaluated", 60*time.Second, func() bool {
		for id := range expected {
			if _, err := ev.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: id})); err != nil {
				return false
			}
		}
		_, err := ev.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: lastID.DecisionID}))
		return err == nil
	})

	correct := 0
	for id, want := range expected {
		resp, err := ev.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: id}))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if strings.TrimPrefix(resp.Msg.Evaluation.Classification.String(), "CLASSIFICATION_") == want {
			correct++
		}
	}
	if acc := float64(correct) / float64(len(expected)); acc < 0.8 {
		t.Fatalf("class accuracy through the pipeline %.3f", acc)
	}

	for _, protocol := range []string{"connect", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			c := evaluatorClient(r.app.URL(), protocol)
			fc := feedbackClient(r.app.URL(), protocol, "")
			got, err := fc.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "fb-0002"}))
			if err != nil || got.Msg.Feedback.GetEvaluation().GetClusterId() == "" {
				t.Fatalf("GetFeedback carries no evaluation: %v %v", got, err)
			}
			clusters, err := c.ListClusters(ctx, connect.NewRequest(&preceptv1.ListClustersRequest{Agent: "coding-agent", PageSize: 5}))
			if err != nil || len(clusters.Msg.Clusters) != 5 || clusters.Msg.NextPageToken == "" {
				t.Fatalf("ListClusters = %v, %v", clusters, err)
			}
			first := clusters.Msg.Clusters[0]
			if first.GetStats().GetSize() < clusters.Msg.Clusters[4].GetStats().GetSize() || len(first.GetRepresentatives()) == 0 {
				t.Fatalf("clusters not largest first or without representatives: %v", clusters.Msg.Clusters)
			}
			one, err := c.GetCluster(ctx, connect.NewRequest(&preceptv1.GetClusterRequest{Id: first.GetId()}))
			if err != nil || len(one.Msg.Cluster.GetMemberIds()) != int(first.GetStats().GetSize()) {
				t.Fatalf("GetCluster = %v, %v", one, err)
			}
			if _, err := c.GetCluster(ctx, connect.NewRequest(&preceptv1.GetClusterRequest{Id: "c-none"})); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("missing cluster: %v", err)
			}
			// A page of members is that stretch of the whole list.
			all := one.Msg.Cluster.GetMemberIds()
			page, err := c.GetCluster(ctx, connect.NewRequest(&preceptv1.GetClusterRequest{Id: first.GetId(), MemberOffset: 1, MemberLimit: 2}))
			if err != nil || !slices.Equal(page.Msg.Cluster.GetMemberIds(), all[1:min(3, len(all))]) || page.Msg.Cluster.GetStats().GetSize() != first.GetStats().GetSize() {
				t.Fatalf("members 2-3 of %v: %v, %v", all, page, err)
			}
			for _, bad := range []*preceptv1.GetClusterRequest{{Id: first.GetId(), MemberOffset: -1}, {Id: first.GetId(), MemberLimit: -5}} {
				if _, err := c.GetCluster(ctx, connect.NewRequest(bad)); connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("GetCluster %v: %v, want invalid argument", bad, err)
				}
			}
			review, err := c.ListNeedsReview(ctx, connect.NewRequest(&preceptv1.ListNeedsReviewRequest{}))
			if err != nil || len(review.Msg.Items) == 0 || len(review.Msg.Items[0].MissingAttributes) == 0 || int(review.Msg.GetTotal()) != len(review.Msg.Items) {
				t.Fatalf("ListNeedsReview = %v, %v", review, err)
			}
			// One a page: the total stays, the last page has no token, and
			// a token past the end (or near the largest int) is an empty page.
			n := int(review.Msg.GetTotal())
			last, err := c.ListNeedsReview(ctx, connect.NewRequest(&preceptv1.ListNeedsReviewRequest{PageSize: 1, PageToken: strconv.Itoa(n - 1)}))
			if err != nil || len(last.Msg.Items) != 1 || last.Msg.GetNextPageToken() != "" || int(last.Msg.GetTotal()) != n {
				t.Fatalf("the last page of needs review: %v, %v", last, err)
			}
			for _, token := range []string{strconv.Itoa(n), strconv.Itoa(math.MaxInt - 1)} {
				past, err := c.ListNeedsReview(ctx, connect.NewRequest(&preceptv1.ListNeedsReviewRequest{PageToken: token}))
				if err != nil || len(past.Msg.Items) != 0 || past.Msg.GetNextPageToken() != "" {
					t.Fatalf("needs review from %s: %v, %v", token, past, err)
				}
			}
			similar, err := fc.FindSimilar(ctx, connect.NewRequest(&preceptv1.FindSimilarRequest{Query: &preceptv1.FindSimilarRequest_Text{Text: "hardcoded API key in the source, use an environment variable"}}))
			if err != nil || len(similar.Msg.Results) == 0 || similar.Msg.Results[0].Similarity < 0.8 {
				t.Fatalf("FindSimilar = %v, %v", similar, err)
			}
			dry := protoDecision("dry-" + protocol)
			dry.ReviewerComment = "Hardcoded secret in config.go again; read it from the environment."
			res, err := c.Evaluate(ctx, connect.NewRequest(&preceptv1.EvaluateRequest{Decision: dry}))
			if err != nil || res.Msg.Evaluation.Classification != preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_HIGH {
				t.Fatalf("Evaluate = %v, %v", res, err)
			}
			if _, err := c.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: "dry-" + protocol})); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("the dry run was stored: %v", err)
			}
		})
	}

	// Edge cases are documented in the feedback repository.
	eventually(t, "edge cases documented", 10*time.Second, func() bool {
		out, err := exec.Command("git", "-C", r.app.FeedbackRepo.Path(), "ls-tree", "--name-only", "main", feedbackstore.EdgeCasesDir+"/").Output()
		return err == nil && strings.Count(string(out), ".md") > 5
	})
	show, err := exec.Command("git", "-C", r.app.FeedbackRepo.Path(), "show", "main:"+feedbackstore.EdgeCasesDir+"/fb-0129.md").CombinedOutput()
	if err != nil || !strings.Contains(string(show), "Edge case") || !strings.Contains(string(show), "backwards compatible") {
		t.Fatalf("edge-case document:\n%s %v", show, err)
	}
}

func TestTheChromaServerBackendServesThePipeline(t *testing.T) {
	url := testenv.Chroma(t)
	r := start(t, fmt.Sprintf("evaluator: {index: {backend: chroma, chroma: {url: %q, collection_prefix: %q}}}", url, fmt.Sprintf("e2e-%d", time.Now().UnixNano())))
	ctx := context.Background()
	entries, _ := fixtureEvents(t)
	xaddAll(t, r.rdb, entries[:60])
	ev := evaluatorClient(r.app.URL(), "grpc")
	eventually(t, "evaluated through Chroma", 60*time.Second, func() bool {
		_, err := ev.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: "fb-0060"}))
		return err == nil
	})
	n, err := r.app.Vectors.Count(ctx)
	if err != nil || n == 0 {
		t.Fatalf("Chroma holds %d vectors (%v)", n, err)
	}
	resp, err := ev.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: "fb-0003"}))
	if err != nil || resp.Msg.Evaluation.Classification != preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_HIGH {
		t.Fatalf("fb-0003 = %v, %v", resp, err)
	}
}

// fakeEmbeddings speaks the OpenAI embeddings API with the local
// embedder's vectors, and can be made to fail.
func fakeEmbeddings(t *testing.T) (*httptest.Server, *atomic.Bool) {
	local := embedding.NewLocal(embedding.LocalOptions{})
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, `{"error":{"message":"model is loading","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		vecs, _ := local.Embed(r.Context(), req.Input)
		var data []map[string]any
		for i, v := range vecs {
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data, "usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
	}))
	t.Cleanup(srv.Close)
	return srv, &failing
}

func TestAnEmbedderOutageDelaysEvaluationVisiblyAndLosesNothing(t *testing.T) {
	srv, failing := fakeEmbeddings(t)
	r := start(t, fmt.Sprintf("evaluator: {embedder: {provider: openai, model: test-embed, base_url: %q}}", srv.URL+"/v1"))
	ctx := context.Background()
	if !strings.Contains(r.logs.String(), "embedder=openai:test-embed") {
		t.Fatalf("the remote embedder is not in use:\n%s", r.logs.String())
	}
	failing.Store(true)
	xaddAll(t, r.rdb, []map[string]any{event("outage-1")})
	fc := feedbackClient(r.app.URL(), "connect", "")
	eventually(t, "stored with a visible evaluation error", 20*time.Second, func() bool {
		got, err := fc.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "outage-1"}))
		return err == nil && got.Msg.Feedback.GetEvaluation() == nil && strings.Contains(got.Msg.Feedback.GetEvaluationError(), "model is loading")
	})
	_, err := evaluatorClient(r.app.URL(), "connect").GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: "outage-1"}))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "will be retried") {
		t.Fatalf("GetEvaluation during the outage: %v", err)
	}
	failing.Store(false)
	eventually(t, "evaluated after the outage", 30*time.Second, func() bool {
		got, err := fc.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "outage-1"}))
		return err == nil && got.Msg.Feedback.GetEvaluation() != nil && got.Msg.Feedback.GetEvaluationError() == ""
	})
}
