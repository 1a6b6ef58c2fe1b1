package app

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/internal/telemetry"
	"github.com/precept-dev/precept/lib/testenv"
)

// exportedSpan is a span as an OTLP receiver got it, with its resource's
// attributes.
type exportedSpan struct {
	resource map[string]string
	span     *tracepb.Span
}

func (s exportedSpan) attr(key string) string { return attrValue(s.span.GetAttributes(), key) }

func attrValue(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() != key {
			continue
		}
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_DoubleValue:
			return fmt.Sprint(v.DoubleValue)
		}
		return kv.GetValue().String()
	}
	return ""
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// request with OpenTelemetry's own protobuf types and keeps the spans and
// the headers it was sent.
//
// The request is decoded as tracepb.TracesData, which OTLP defines with
// the same field (1: repeated ResourceSpans) as the collector's
// ExportTraceServiceRequest. The collector package itself cannot be
// linked here: its grpc-gateway file imports grpc's health service, which
// registers grpc/health/v1/health.proto a second time beside
// gen/grpc/health/v1 and panics at init. Its response is empty: an
// ExportTraceServiceResponse with no partial success.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []exportedSpan
	requests int
	headers  []http.Header
	// bodies are the export requests as sent, for checks that no text a
	// person wrote and no secret was exported anywhere in them.
	bodies [][]byte
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			z, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = z
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req tracepb.TracesData
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("OTLP receiver: decode export request: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.requests++
		rc.headers = append(rc.headers, r.Header.Clone())
		rc.bodies = append(rc.bodies, b)
		for _, rs := range req.GetResourceSpans() {
			res := map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				res[kv.GetKey()] = attrValue(rs.GetResource().GetAttributes(), kv.GetKey())
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					rc.spans = append(rc.spans, exportedSpan{resource: res, span: s})
				}
			}
		}
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) received() ([]exportedSpan, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]exportedSpan(nil), rc.spans...), rc.requests
}

// TestTracesJoinADecisionsLifeAndEachRPC sends decisions through the
// stream to a preceptd exporting to a real OTLP/HTTP receiver, calls an
// RPC, stops preceptd (which flushes), and reads what was exported.
func TestTracesJoinADecisionsLifeAndEachRPC(t *testing.T) {
	rc := newOTLPReceiver(t)
	r := start(t, ruleTokensYAML+fmt.Sprintf(`rules: {propose_interval: 200ms}
telemetry: {otlp_endpoint: %q, otlp_headers: {X-Tenant: precept-test}}
`, rc.URL))
	if r.app.Traces == nil {
		t.Fatal("telemetry.otlp_endpoint is set but no tracer was built")
	}
	ctx := context.Background()
	events := clusterEvents()
	xaddAll(t, r.rdb, events)
	const id = "rule-d1"
	comment := events[0]["reviewer_comment"].(string)

	viewer := ruleClient(r.app.URL(), "connect", viewerToken)
	p := pendingProposal(t, viewer)
	evaluations := preceptv1connect.NewEvaluatorServiceClient(protocols(r.app.URL(), viewerToken)["connect"], r.app.URL())
	var ev *preceptv1.Evaluation
	eventually(t, id+" evaluated", 10*time.Second, func() bool {
		resp, err := evaluations.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: id}))
		if err != nil {
			return false
		}
		ev = resp.Msg.GetEvaluation()
		return true
	})
	// An RPC over gRPC too, carrying a caller's traceparent.
	caller := "4bf92f3577b34da6a3ce929d0e0e4736"
	req := connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: id})
	req.Header().Set("traceparent", "00-"+caller+"-00f067aa0ba902b7-01")
	if _, err := feedbackClient(r.app.URL(), "grpc", viewerToken).GetFeedback(ctx, req); err != nil {
		t.Fatal(err)
	}
	// A decision recorded by RPC: its stored span links to the RPC's.
	if _, err := feedbackClient(r.app.URL(), "connect", aliceToken).RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: protoDecision("api-1")})); err != nil {
		t.Fatal(err)
	}
	r.stop() // Close flushes the spans still buffered.

	spans, _ := rc.received()
	// Nothing a person wrote and no token anywhere in what was exported:
	// attributes, events, status messages, links or the resource.
	rc.mu.Lock()
	for _, b := range rc.bodies {
		for _, secret := range []string{comment, "retry helper", aliceToken, viewerToken} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("an export request holds %q, text a person wrote or a secret", secret)
			}
		}
	}
	rc.mu.Unlock()
	want := hex.EncodeToString(func() []byte { x := telemetry.DecisionTraceID(id); return x[:] }())
	stages := map[string]exportedSpan{}
	var rpc, record, apiStored *exportedSpan
	for i, s := range spans {
		if got := s.resource["service.name"]; got != "precept" || s.resource["precept.node"] != "test-node" || s.resource["service.instance.id"] != "test-node" {
			t.Fatalf("span %q: resource %v", s.span.GetName(), s.resource)
		}
		if s.attr(telemetry.KeyDecisionID) == id {
			if got := hex.EncodeToString(s.span.GetTraceId()); got != want {
				t.Errorf("%s of %s in trace %s, want %s (DecisionTraceID)", s.span.GetName(), id, got, want)
			}
			stages[s.span.GetName()] = s
		}
		if s.span.GetName() == "precept.v1.FeedbackService/GetFeedback" && s.span.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
			rpc = &spans[i]
		}
		if s.span.GetName() == "precept.v1.FeedbackService/RecordFeedback" && s.span.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
			record = &spans[i]
		}
		if s.attr(telemetry.KeyDecisionID) == "api-1" {
			switch s.span.GetName() {
			case "decision.read":
				t.Errorf("decision api-1, recorded by RPC, has a read span")
			case "decision.stored":
				apiStored = &spans[i]
			}
		}
	}
	for _, stage := range []string{"decision.read", "decision.stored", "decision.evaluated", "decision.proposal_drafted"} {
		if _, ok := stages[stage]; !ok {
			t.Errorf("no %s span for %s among %d spans", stage, id, len(spans))
		}
	}
	if s := stages["decision.read"]; s.span != nil && (s.attr(telemetry.KeyAgent) != "coding-agent" || s.attr(telemetry.KeyGate) != "HITL-2" || s.attr(telemetry.KeyStreamEntry) == "") {
		t.Errorf("read span attributes: %v", s.span.GetAttributes())
	}
	if s := stages["decision.stored"]; s.span != nil && s.attr(telemetry.KeyCreated) != "true" {
		t.Errorf("stored span attributes: %v", s.span.GetAttributes())
	}
	if s := stages["decision.evaluated"]; s.span != nil && (s.attr(telemetry.KeyClass) != ev.GetClassification().String() && !strings.HasSuffix(ev.GetClassification().String(), s.attr(telemetry.KeyClass)) || s.attr(telemetry.KeyCluster) != ev.GetClusterId() || s.attr(telemetry.KeyCluster) == "") {
		t.Errorf("evaluated span attributes %v; evaluation class %s cluster %q", s.span.GetAttributes(), ev.GetClassification(), ev.GetClusterId())
	}
	if s := stages["decision.proposal_drafted"]; s.span != nil && s.attr(telemetry.KeyProposal) != p.GetProposalId() {
		t.Errorf("proposal_drafted span names proposal %q, want %q", s.attr(telemetry.KeyProposal), p.GetProposalId())
	}
	if rpc == nil {
		t.Fatalf("no server span for GetFeedback among %d spans", len(spans))
	}
	if got := hex.EncodeToString(rpc.span.GetTraceId()); got == caller || got == want {
		t.Errorf("the RPC span joined trace %s: a caller's traceparent must be a link, not a parent", got)
	}
	if links := rpc.span.GetLinks(); len(links) != 1 || hex.EncodeToString(links[0].GetTraceId()) != caller {
		t.Errorf("RPC span links = %v, want the caller's trace %s", links, caller)
	}
	if rpc.attr("rpc.system.name") != "grpc" || rpc.attr("rpc.method") != "precept.v1.FeedbackService/GetFeedback" || rpc.attr("rpc.response.status_code") != "OK" {
		t.Errorf("RPC span attributes: %v", rpc.span.GetAttributes())
	}
	if record == nil || apiStored == nil {
		t.Fatalf("RecordFeedback span %v, stored span of api-1 %v", record, apiStored)
	}
	apiTrace := telemetry.DecisionTraceID("api-1")
	if got := hex.EncodeToString(apiStored.span.GetTraceId()); got != apiTrace.String() {
		t.Errorf("stored span of api-1 in trace %s, want %s", got, apiTrace)
	}
	if l := apiStored.span.GetLinks(); len(l) != 1 || !bytes.Equal(l[0].GetTraceId(), record.span.GetTraceId()) || !bytes.Equal(l[0].GetSpanId(), record.span.GetSpanId()) {
		t.Errorf("stored span of api-1 links %v, want the RecordFeedback span %x/%x", l, record.span.GetTraceId(), record.span.GetSpanId())
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.headers) == 0 || rc.headers[0].Get("X-Tenant") != "precept-test" {
		t.Errorf("export headers: %v", rc.headers)
	}
}

// TestTracingOffBuildsNoExporterNorInterceptor: with telemetry.otlp_endpoint
// empty, nothing of OpenTelemetry is built, even with the SDK's own
// environment variables pointing at a receiver.
func TestTracingOffBuildsNoExporterNorInterceptor(t *testing.T) {
	rc := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rc.URL+"/v1/traces")
	r := start(t, "")
	if r.app.Traces != nil {
		t.Fatal("a tracer was built with telemetry.otlp_endpoint empty")
	}
	if len(r.app.rpcInterceptors) != 2 {
		t.Fatalf("%d interceptors, want metrics and authentication only", len(r.app.rpcInterceptors))
	}
	for _, i := range r.app.rpcInterceptors {
		if _, ok := i.(*otelconnect.Interceptor); ok {
			t.Fatal("the OpenTelemetry interceptor is installed with tracing off")
		}
	}
	if _, ok := r.app.decisionSink().(tracedSink); ok {
		t.Fatal("the stream stores through the tracing sink with tracing off")
	}
	if _, ok := r.app.apiStore().(tracedAPIStore); ok {
		t.Fatal("the API stores through the tracing sink with tracing off")
	}
	xaddAll(t, r.rdb, []map[string]any{event("off-1")})
	c := feedbackClient(r.app.URL(), "connect", "")
	eventually(t, "off-1 stored", 10*time.Second, func() bool {
		_, err := c.GetFeedback(context.Background(), connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "off-1"}))
		return err == nil
	})
	r.stop()
	if _, n := rc.received(); n != 0 {
		t.Fatalf("the receiver got %d export requests with tracing off", n)
	}
}

// launchReplica runs a preceptd named node in process, like launch, on a
// data directory and Redis another replica shares.
func launchReplica(t *testing.T, node, dataDir, redisAddr, yaml string) (*App, func()) {
	t.Helper()
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
node: %s
redis: {addr: %q, block: 100ms, claim_interval: 200ms}
feedback: {batch_wait: 5ms, fsync: false, follow_interval: 100ms}
%s`, dataDir, node, redisAddr, yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", node, err)
			}
			a.Close()
		})
	}
	t.Cleanup(stop)
	return a, stop
}

// TestADecisionsSpansFromTwoReplicasShareItsTrace: one replica reads and
// stores a decision, another (the only one evaluating) evaluates it; they
// share nothing but the data directory and Redis, and the spans still
// land in the decision's trace.
func TestADecisionsSpansFromTwoReplicasShareItsTrace(t *testing.T) {
	rc := newOTLPReceiver(t)
	dataDir, redisAddr := t.TempDir(), testenv.Redis(t)
	telemetryYAML := fmt.Sprintf("telemetry: {otlp_endpoint: %q}\n", rc.URL)
	reader, stopReader := launchReplica(t, "replica-a", dataDir, redisAddr, telemetryYAML+"evaluator: {enabled: false}\n")
	xaddAll(t, testenv.RedisClient(t, redisAddr), []map[string]any{event("two-1")})
	c := feedbackClient(reader.URL(), "connect", "")
	eventually(t, "two-1 stored by replica-a", 10*time.Second, func() bool {
		_, err := c.GetFeedback(context.Background(), connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "two-1"}))
		return err == nil
	})
	judge, stopJudge := launchReplica(t, "replica-b", dataDir, redisAddr, telemetryYAML)
	ev := preceptv1connect.NewEvaluatorServiceClient(protocols(judge.URL(), "")["connect"], judge.URL())
	eventually(t, "two-1 evaluated by replica-b", 20*time.Second, func() bool {
		_, err := ev.GetEvaluation(context.Background(), connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: "two-1"}))
		return err == nil
	})
	stopJudge()
	stopReader()

	spans, _ := rc.received()
	want := telemetry.DecisionTraceID("two-1")
	nodes := map[string]string{}
	for _, s := range spans {
		if s.attr(telemetry.KeyDecisionID) != "two-1" {
			continue
		}
		if got := hex.EncodeToString(s.span.GetTraceId()); got != want.String() {
			t.Errorf("%s from %s in trace %s, want %s", s.span.GetName(), s.resource["precept.node"], got, want)
		}
		nodes[s.span.GetName()] = s.resource["precept.node"]
	}
	if nodes["decision.read"] != "replica-a" || nodes["decision.stored"] != "replica-a" || nodes["decision.evaluated"] != "replica-b" {
		t.Fatalf("spans of two-1 by replica: %v; want read and stored by replica-a, evaluated by replica-b", nodes)
	}
}
