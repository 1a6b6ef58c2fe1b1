package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// DefaultExportPageSize is how many decisions an export reads from the
// feedback index at a time: what it holds in memory besides one rule
// effect listing.
const DefaultExportPageSize = 256

// ExportStore is what an export reads of the feedback store;
// feedbackstore.Store implements it.
type ExportStore interface {
	// Since returns up to limit decisions numbered after seq, in commit
	// order.
	Since(seq uint64, limit int) ([]feedbackstore.Record, error)
	LastSeq() (uint64, error)
}

// ExportEvaluations looks up decisions' evaluations; evaluator.Service
// implements it.
type ExportEvaluations interface {
	Evaluation(ctx context.Context, id string) (ev evaluator.Evaluation, pending string, err error)
}

var (
	_ ExportStore       = (*feedbackstore.Store)(nil)
	_ ExportEvaluations = (*evaluator.Service)(nil)
)

// RuleEffectsFunc returns the effect of every rule, retired ones
// included, or an error matching ErrNoRuleEffects when the server does
// not compute them.
type RuleEffectsFunc func(ctx context.Context) ([]*preceptv1.RuleEffect, error)

// ErrNoRuleEffects is what a RuleEffectsFunc returns when rule effects
// are not computed: the export then has none, and its summary says so.
var ErrNoRuleEffects = errors.New("rule effects are not computed by this server")

// ExportOptions configures an ExportService; the zero value exports
// decisions and evaluations, no rule effects, and refuses anonymized
// exports.
type ExportOptions struct {
	// RuleEffects provides the rule-effect records; nil exports none, and
	// the summary says so.
	RuleEffects RuleEffectsFunc
	// Proposals links evaluations to the rule proposal drafted from their
	// cluster, as GetEvaluation does; nil leaves the link out.
	Proposals ProposalFinder
	// Salt keys the pseudonyms of anonymized exports (config export.salt);
	// empty refuses them.
	Salt string
	// PageSize is how many decisions are read at a time; default
	// DefaultExportPageSize.
	PageSize int
	Log      *slog.Logger
	Now      func() time.Time
}

// ExportService implements preceptv1connect.ExportServiceHandler.
type ExportService struct {
	store       ExportStore
	evaluations ExportEvaluations
	ruleEffects RuleEffectsFunc
	proposals   ProposalFinder
	anon        *anonymizer
	pageSize    int
	log         *slog.Logger
	now         func() time.Time
}

var _ preceptv1connect.ExportServiceHandler = (*ExportService)(nil)

// NewExportService returns the export service over the feedback store and
// the evaluator. The salt stays inside it.
func NewExportService(store ExportStore, evaluations ExportEvaluations, opts ExportOptions) *ExportService {
	s := &ExportService{store: store, evaluations: evaluations, ruleEffects: opts.RuleEffects, proposals: opts.Proposals,
		anon: newAnonymizer(opts.Salt), pageSize: opts.PageSize, log: opts.Log, now: opts.Now}
	if s.pageSize <= 0 {
		s.pageSize = DefaultExportPageSize
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// exportRange is the request's range of decision timestamps: [from, to),
// a zero bound open.
type exportRange struct{ from, to time.Time }

func (r exportRange) contains(t time.Time) bool {
	return (r.from.IsZero() || !t.Before(r.from)) && (r.to.IsZero() || t.Before(r.to))
}

// fullExportRole is the role a full export (names and free text) needs:
// a copy of every comment and output leaves precept's access control with
// it. Anonymized exports need only a reader's.
const fullExportRole = precept.RoleApprover

// check validates a request and the caller's right to it.
func (s *ExportService) check(ctx context.Context, m *preceptv1.ExportRequest) (exportRange, error) {
	var r exportRange
	for _, b := range []struct {
		name string
		ts   *timestamppb.Timestamp
		dst  *time.Time
	}{{"from", m.GetFrom(), &r.from}, {"to", m.GetTo(), &r.to}} {
		if b.ts == nil {
			continue
		}
		if err := b.ts.CheckValid(); err != nil {
			return r, invalid(b.name, "out of range (0001-01-01 to 9999-12-31)")
		}
		*b.dst = b.ts.AsTime()
	}
	if !r.from.IsZero() && !r.to.IsZero() && !r.from.Before(r.to) {
		return r, invalid("from", "%s is not before to (%s)", r.from.Format(time.RFC3339), r.to.Format(time.RFC3339))
	}
	id := caller(ctx)
	if !m.GetAnonymize() && !id.Allows(fullExportRole) {
		return r, precept.Errorf(precept.PermissionDenied,
			"%s has role %s; a full export needs %s (an anonymized export, --anonymize, needs %s)", id.Name, id.Role, fullExportRole, precept.RoleReader)
	}
	if m.GetAnonymize() && s.anon == nil {
		return r, precept.Errorf(precept.FailedPrecondition, "anonymized exports need a salt: set export.salt (or PRECEPT_EXPORT_SALT) on the server")
	}
	return r, nil
}

// Export streams the decisions whose timestamp is in the range, each
// followed by its evaluation, then every rule effect, then the summary.
// Decisions are read a page at a time in commit order, up to the last one
// indexed when the export began.
func (s *ExportService) Export(ctx context.Context, req *connect.Request[preceptv1.ExportRequest], stream *connect.ServerStream[preceptv1.ExportRecord]) error {
	const proc = preceptv1connect.ExportServiceExportProcedure
	m := req.Msg
	r, err := s.check(ctx, m)
	if err != nil {
		return toConnect(ctx, s.log, proc, err)
	}
	sum, err := s.export(ctx, m.GetAnonymize(), r, stream.Send)
	if err != nil && ctx.Err() != nil {
		// The client went away: nothing to report to anyone.
		return nil
	}
	if err != nil {
		return toConnect(ctx, s.log, proc, err)
	}
	if !r.from.IsZero() {
		sum.From = timestamppb.New(r.from)
	}
	if !r.to.IsZero() {
		sum.To = timestamppb.New(r.to)
	}
	sum.ExportedAt = timestamppb.New(s.now())
	s.log.InfoContext(ctx, "export", "by", caller(ctx).Name, "anonymized", sum.Anonymized,
		"decisions", sum.Decisions, "evaluations", sum.Evaluations, "rule_effects", sum.RuleEffects)
	return stream.Send(&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Summary{Summary: sum}})
}

// export sends every record but the summary, and returns the summary.
func (s *ExportService) export(ctx context.Context, anonymize bool, r exportRange, send func(*preceptv1.ExportRecord) error) (*preceptv1.ExportSummary, error) {
	sum := &preceptv1.ExportSummary{Anonymized: anonymize}
	last, err := s.store.LastSeq()
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	sum.LastSeq = last
	scrub := func(*preceptv1.ExportRecord) {}
	if anonymize {
		scrub = func(rec *preceptv1.ExportRecord) { s.anon.Anonymize(rec) }
	}
	emit := func(rec *preceptv1.ExportRecord) error {
		scrub(rec)
		return send(rec)
	}
pages:
	for seq := uint64(0); seq < last; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := s.store.Since(seq, s.pageSize)
		if err != nil {
			return nil, fmt.Errorf("export: read decisions after %d: %w", seq, err)
		}
		if len(page) == 0 {
			break
		}
		for _, rec := range page {
			if rec.Seq > last {
				// Stored during the export: left to the next one.
				break pages
			}
			seq = rec.Seq
			if !r.contains(rec.Timestamp) {
				continue
			}
			if err := emit(&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Decision{Decision: FeedbackToProto(rec)}}); err != nil {
				return nil, err
			}
			sum.Decisions++
			// Why an evaluation is pending is left out: it is free text
			// about the decision. The summary counts them.
			ev, _, err := s.evaluations.Evaluation(ctx, rec.DecisionID)
			switch {
			case errors.Is(err, precept.ErrNotFound):
				sum.PendingEvaluations++
				continue
			case err != nil:
				return nil, fmt.Errorf("export: evaluation of %s: %w", rec.DecisionID, err)
			}
			if err := emit(&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Evaluation{Evaluation: s.evaluation(ctx, ev)}}); err != nil {
				return nil, err
			}
			sum.Evaluations++
		}
	}
	return sum, s.sendRuleEffects(ctx, sum, emit)
}

// evaluation converts an evaluation, with the proposal its action led to.
func (s *ExportService) evaluation(ctx context.Context, ev evaluator.Evaluation) *preceptv1.Evaluation {
	p := EvaluationToProto(ev)
	if a := p.GetProposedAction(); a != nil && s.proposals != nil && ev.ClusterID != "" {
		a.ProposalId, _ = s.proposals.ProposalForCluster(ctx, ev.ClusterID)
	}
	return p
}

// sendRuleEffects sends every rule's effect, or notes why there are none.
func (s *ExportService) sendRuleEffects(ctx context.Context, sum *preceptv1.ExportSummary, emit func(*preceptv1.ExportRecord) error) error {
	var (
		effects []*preceptv1.RuleEffect
		err     = ErrNoRuleEffects
	)
	if s.ruleEffects != nil {
		effects, err = s.ruleEffects(ctx)
	}
	if errors.Is(err, ErrNoRuleEffects) {
		sum.Notes = append(sum.Notes, ErrNoRuleEffects.Error()+": no rule_effect records")
		return nil
	}
	if err != nil {
		return fmt.Errorf("export: rule effects: %w", err)
	}
	for _, e := range effects {
		// A copy: anonymizing rewrites the message, which the provider may
		// keep and hand to others.
		e = proto.CloneOf(e)
		if err := emit(&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_RuleEffect{RuleEffect: e}}); err != nil {
			return err
		}
		sum.RuleEffects++
	}
	return nil
}
