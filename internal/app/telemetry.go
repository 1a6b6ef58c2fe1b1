package app

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/stream"
	"github.com/precept-dev/precept/internal/telemetry"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// maxCitedSpans bounds the proposal_drafted spans one proposal records:
// one per cited decision, up to this many.
const maxCitedSpans = 256

// openTelemetry starts the OTLP exporter when telemetry.otlp_endpoint is
// set (docs/telemetry.md). With it empty a.Traces stays nil and nothing
// of OpenTelemetry is built: no exporter, no interceptor, no wrapped sink.
func (a *App) openTelemetry() error {
	t := a.Config.Telemetry
	if !t.Enabled() {
		return nil
	}
	headers, err := t.Headers()
	if err != nil {
		return err
	}
	a.Traces, err = telemetry.New(telemetry.Options{
		Endpoint:    t.OTLPEndpoint,
		Headers:     headers,
		SampleRatio: t.SampleRatio,
		Node:        a.Config.NodeName(),
		Logger:      a.Log.With("component", "telemetry"),
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.Traces.Shutdown)
	a.spans = &spanRecorder{traces: a.Traces, log: a.Log.With("component", "telemetry")}
	a.Log.Info("exporting traces over OTLP/HTTP", "endpoint", telemetry.Redacted(t.OTLPEndpoint), "sample_ratio", t.SampleRatio)
	return nil
}

// withTracing returns the interceptors every Connect handler gets:
// the span of each RPC when tracing is on, outermost so it times the
// rest, then metrics and authentication.
func (a *App) withTracing(rest ...connect.Interceptor) ([]connect.Interceptor, error) {
	if a.Traces == nil {
		return rest, nil
	}
	i, err := a.Traces.Interceptor()
	if err != nil {
		return nil, err
	}
	return append([]connect.Interceptor{i}, rest...), nil
}

// decisionSink is what the stream consumer stores through: the feedback
// store, wrapped to record the read and stored spans when tracing is on.
func (a *App) decisionSink() stream.Sink {
	if a.Traces == nil {
		return a.Feedback
	}
	return tracedSink{Sink: a.Feedback, traces: a.Traces}
}

// apiStore is what FeedbackService records decisions in: the feedback
// store, wrapped to record the stored span, linked to the RPC's, when
// tracing is on.
func (a *App) apiStore() api.FeedbackStore {
	if a.Traces == nil {
		return a.Feedback
	}
	return tracedAPIStore{FeedbackStore: a.Feedback, sink: tracedSink{Sink: a.Feedback, traces: a.Traces}}
}

// tracedAPIStore stores through a tracedSink and reads from the store.
type tracedAPIStore struct {
	api.FeedbackStore
	sink tracedSink
}

func (s tracedAPIStore) Store(ctx context.Context, records []precept.Feedback) ([]bool, error) {
	return s.sink.Store(ctx, records)
}

// tracedSink records, for each decision it stores, a stored span (the
// store's commit to feedback.git) and, for one read from the stream, a
// read span (from when the entry was read and decoded, its received_at,
// to when it was handed to the store). The spans link to the span in
// ctx, an RPC's for a decision recorded through the API.
type tracedSink struct {
	stream.Sink
	traces *telemetry.Tracer
}

func (s tracedSink) Store(ctx context.Context, records []precept.Feedback) ([]bool, error) {
	start := time.Now()
	created, err := s.Sink.Store(ctx, records)
	end := time.Now()
	for i, f := range records {
		attrs := []telemetry.Attr{
			telemetry.String(telemetry.KeyAgent, f.Agent),
			telemetry.String(telemetry.KeyGate, f.GateID),
		}
		if entry, ok := strings.CutPrefix(f.Source, "stream:"); ok {
			attrs = append(attrs, telemetry.String(telemetry.KeyStreamEntry, entry))
			if err == nil {
				// A failed store is retried with the same records; the
				// read span is recorded once, by the attempt that succeeds.
				s.traces.Decision(telemetry.Step{Stage: telemetry.StageRead, DecisionID: f.DecisionID, Start: f.ReceivedAt, End: start, Attrs: attrs, Cause: ctx})
			}
		}
		if i < len(created) {
			attrs = append(attrs, telemetry.Bool(telemetry.KeyCreated, created[i]))
		}
		s.traces.Decision(telemetry.Step{Stage: telemetry.StageStored, DecisionID: f.DecisionID, Start: start, End: end, Err: err, Attrs: attrs, Cause: ctx})
	}
	return created, err
}

// spanRecorder records the spans of a decision's life that come from the
// evaluator and the rule manager: evaluated, and proposal_drafted for
// each decision a newly drafted proposal cites. It exists only with
// tracing on.
type spanRecorder struct {
	traces *telemetry.Tracer
	log    *slog.Logger
	// rules is where drafted proposals are read, set by followProposals.
	rules *rules.Manager
	// pending counts the proposal_drafted spans being recorded, so the
	// app's Close waits for them before the rules repository closes.
	pending sync.WaitGroup
}

// evaluated records an evaluated span for each evaluation
// (evaluator.Options.OnEvaluated): from when the evaluator classified
// the decision to when its evaluation was committed.
func (r *spanRecorder) evaluated(evs []evaluator.Evaluation) {
	end := time.Now()
	for _, ev := range evs {
		r.traces.Decision(telemetry.Step{
			Stage: telemetry.StageEvaluated, DecisionID: ev.DecisionID, Start: ev.EvaluatedAt, End: end,
			Attrs: []telemetry.Attr{
				telemetry.String(telemetry.KeyClass, string(ev.Class)),
				telemetry.String(telemetry.KeyCluster, ev.ClusterID),
				telemetry.Float(telemetry.KeyConfidence, ev.Confidence),
				telemetry.Bool(telemetry.KeyNeedsReview, ev.NeedsReview),
				telemetry.String(telemetry.KeyEvaluator, ev.Evaluator),
				telemetry.Int(telemetry.KeyRevision, ev.Revision),
			},
		})
	}
}

// followProposals records a proposal_drafted span in the trace of each
// decision a newly drafted proposal cites. The proposal is read off the
// rule manager's goroutine: listeners must not call back into it.
func (r *spanRecorder) followProposals(m *rules.Manager) {
	r.rules = m
	m.OnChange(func(c rulefmt.Change) {
		if c.Kind != rulefmt.ProposalCreated || c.ProposalID == "" {
			return
		}
		at := time.Now()
		r.pending.Add(1)
		go func() {
			defer r.pending.Done()
			r.proposal(c.ProposalID, at)
		}()
	})
}

// wait returns once every proposal_drafted span being recorded is.
func (r *spanRecorder) wait() error { r.pending.Wait(); return nil }

func (r *spanRecorder) proposal(id string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := r.rules.Get(ctx, id)
	if err != nil {
		r.log.Debug("trace a drafted proposal: read it", "proposal", id, "err", err)
		return
	}
	for i, d := range p.FeedbackIDs {
		if i == maxCitedSpans {
			break
		}
		r.traces.Decision(telemetry.Step{
			Stage: telemetry.StageProposalDrafted, DecisionID: d, Start: p.CreatedAt, End: at,
			Attrs: []telemetry.Attr{
				telemetry.String(telemetry.KeyProposal, p.ID),
				telemetry.String(telemetry.KeyProposalKind, string(p.Kind)),
				telemetry.String(telemetry.KeyCluster, p.ClusterID),
			},
		})
	}
}
