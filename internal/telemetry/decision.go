package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The stages of a decision's life, each a span named "decision.<stage>"
// (docs/telemetry.md).
const (
	// StageRead: the entry was read from the stream and decoded; the span
	// runs from then until the decision is handed to the feedback store.
	StageRead = "read"
	// StageStored: the feedback store committed the decision to
	// feedback.git (or found it there already).
	StageStored = "stored"
	// StageEvaluated: the evaluator classified the decision.
	StageEvaluated = "evaluated"
	// StageProposalDrafted: a proposal was drafted that cites the
	// decision as evidence.
	StageProposalDrafted = "proposal_drafted"
)

// Attribute keys of decision spans. Values are ids and labels, never the
// reviewer's comment or any other text a person wrote.
const (
	KeyDecisionID   = "precept.decision.id"
	KeyAgent        = "precept.agent"
	KeyGate         = "precept.gate"
	KeyStreamEntry  = "precept.stream.entry_id"
	KeyCreated      = "precept.decision.created"
	KeyClass        = "precept.evaluation.class"
	KeyCluster      = "precept.evaluation.cluster_id"
	KeyConfidence   = "precept.evaluation.confidence"
	KeyNeedsReview  = "precept.evaluation.needs_review"
	KeyEvaluator    = "precept.evaluation.evaluator"
	KeyRevision     = "precept.evaluation.revision"
	KeyProposal     = "precept.proposal.id"
	KeyProposalKind = "precept.proposal.kind"
)

// Attr is one span attribute; make it with String, Bool, Int or Float.
type Attr struct{ kv attribute.KeyValue }

// String is a string attribute.
func String(key, value string) Attr { return Attr{attribute.String(key, value)} }

// Bool is a boolean attribute.
func Bool(key string, value bool) Attr { return Attr{attribute.Bool(key, value)} }

// Int is an integer attribute.
func Int(key string, value int) Attr { return Attr{attribute.Int(key, value)} }

// Float is a floating-point attribute.
func Float(key string, value float64) Attr { return Attr{attribute.Float64(key, value)} }

// Step is one stage of one decision's life, recorded as a span.
type Step struct {
	Stage      string
	DecisionID string
	Start, End time.Time
	// Err, when not nil, marks the span failed with Err's text (errors of
	// the store and the evaluator; they carry no decision text).
	Err   error
	Attrs []Attr
	// Cause, when it carries a span (an RPC's), is linked from this one:
	// the decision's trace points to the request that recorded it.
	Cause context.Context
}

// Decision records s as a span in the decision's trace
// (DecisionTraceID). The span is a root: the stages run in different
// loops and on different replicas, and the trace id alone joins them.
func (t *Tracer) Decision(s Step) {
	ctx := context.WithValue(context.Background(), decisionKey{}, s.DecisionID)
	kind := trace.SpanKindInternal
	if s.Stage == StageRead {
		kind = trace.SpanKindConsumer
	}
	attrs := make([]attribute.KeyValue, 0, len(s.Attrs)+1)
	attrs = append(attrs, attribute.String(KeyDecisionID, s.DecisionID))
	for _, a := range s.Attrs {
		attrs = append(attrs, a.kv)
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(kind), trace.WithTimestamp(s.Start), trace.WithAttributes(attrs...)}
	if s.Cause != nil {
		if sc := trace.SpanContextFromContext(s.Cause); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	_, span := t.tracer.Start(ctx, "decision."+s.Stage, opts...)
	if s.Err != nil {
		span.SetStatus(codes.Error, s.Err.Error())
	}
	span.End(trace.WithTimestamp(s.End))
}

// DecisionTraceID is the trace id of every span of the decision id: the
// first 16 bytes of SHA-256("precept decision " + id). Anyone who knows a
// decision id can find its trace; it reveals nothing else.
func DecisionTraceID(id string) trace.TraceID {
	sum := sha256.Sum256([]byte("precept decision " + id))
	var t trace.TraceID
	copy(t[:], sum[:16])
	if !t.IsValid() {
		t[15] = 1
	}
	return t
}

// decisionKey carries a decision id to decisionIDs through a context.
type decisionKey struct{}

// decisionIDs gives a root span of a decision the decision's trace id,
// and every other root span a random one; span ids are random.
type decisionIDs struct{}

func (decisionIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if id, ok := ctx.Value(decisionKey{}).(string); ok {
		return DecisionTraceID(id), randomSpanID()
	}
	var t trace.TraceID
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, randomSpanID()
}

func (decisionIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}
