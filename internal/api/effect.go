package api

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/effect"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Effects is what EffectService needs of the learning loop; effect.Tracker
// implements it.
type Effects interface {
	Effect(ctx context.Context, ruleID string) (effect.Effect, error)
	Effects(ctx context.Context, agent string) ([]effect.Effect, error)
}

var _ Effects = (*effect.Tracker)(nil)

// EffectService implements preceptv1connect.EffectServiceHandler
// (docs/effects.md). With the learning loop switched off (Effects nil)
// it says so.
type EffectService struct {
	Effects Effects
	// Retired lists the rules that left main, for include_retired.
	Retired func(ctx context.Context, agent string) ([]string, error)
	Log     *slog.Logger
}

var _ preceptv1connect.EffectServiceHandler = (*EffectService)(nil)

func (s *EffectService) off() error {
	return precept.Errorf(precept.FailedPrecondition, "rule effects are switched off on this server (effects.enabled)")
}

// GetRuleEffect reports one rule's effect, computed now.
func (s *EffectService) GetRuleEffect(ctx context.Context, req *connect.Request[preceptv1.GetRuleEffectRequest]) (*connect.Response[preceptv1.GetRuleEffectResponse], error) {
	const proc = preceptv1connect.EffectServiceGetRuleEffectProcedure
	if s.Effects == nil {
		return nil, toConnect(ctx, s.Log, proc, s.off())
	}
	id := req.Msg.GetRuleId()
	if !rulefmt.ValidRuleID(id) {
		return nil, toConnect(ctx, s.Log, proc, precept.Errorf(precept.Invalid, "rule_id: %q is not a rule id (r-…)", text.ClipRunes(id, 64)))
	}
	e, err := s.Effects.Effect(ctx, id)
	if err != nil {
		return nil, toConnect(ctx, s.Log, proc, err)
	}
	return connect.NewResponse(&preceptv1.GetRuleEffectResponse{Effect: EffectToProto(e)}), nil
}

// ListRuleEffects reports the effects of an agent's rules (every agent's
// when none is named).
func (s *EffectService) ListRuleEffects(ctx context.Context, req *connect.Request[preceptv1.ListRuleEffectsRequest]) (*connect.Response[preceptv1.ListRuleEffectsResponse], error) {
	const proc = preceptv1connect.EffectServiceListRuleEffectsProcedure
	if s.Effects == nil {
		return nil, toConnect(ctx, s.Log, proc, s.off())
	}
	agent := req.Msg.GetAgent()
	if agent != "" && !rulefmt.ValidName(agent) {
		return nil, toConnect(ctx, s.Log, proc, precept.Errorf(precept.Invalid, "agent: %q is not an agent name", text.ClipRunes(agent, 64)))
	}
	es, err := s.Effects.Effects(ctx, agent)
	if err != nil {
		return nil, toConnect(ctx, s.Log, proc, err)
	}
	out := &preceptv1.ListRuleEffectsResponse{}
	for _, e := range es {
		out.Effects = append(out.Effects, EffectToProto(e))
	}
	if req.Msg.GetIncludeRetired() && s.Retired != nil {
		ids, err := s.Retired(ctx, agent)
		if err != nil {
			return nil, toConnect(ctx, s.Log, proc, err)
		}
		for _, id := range ids {
			e, err := s.Effects.Effect(ctx, id)
			if err != nil {
				return nil, toConnect(ctx, s.Log, proc, err)
			}
			out.Effects = append(out.Effects, EffectToProto(e))
		}
	}
	return connect.NewResponse(out), nil
}

var attributions = map[effect.Attribution]preceptv1.Attribution{
	effect.ByPromptVersion: preceptv1.Attribution_ATTRIBUTION_PROMPT_VERSION,
	effect.ByAgentTime:     preceptv1.Attribution_ATTRIBUTION_AGENT_TIME,
	effect.Mixed:           preceptv1.Attribution_ATTRIBUTION_MIXED,
}

func intervalToProto(i effect.Interval) *preceptv1.Interval {
	return &preceptv1.Interval{Low: i.Low, High: i.High}
}

// EffectToProto converts an effect; the export uses it too.
func EffectToProto(e effect.Effect) *preceptv1.RuleEffect {
	out := &preceptv1.RuleEffect{
		RuleId: e.RuleID, Agents: e.Agents, Status: ruleStatuses[e.Status], Importance: importances[e.Importance],
		Confidence: e.Confidence, Category: e.Category, ClusterId: e.ClusterID, ActivatedAt: tsOrNil(e.ActivatedAt),
		Attribution: attributions[e.Attribution], Exposures: e.Exposures, ExposuresByPromptVersion: e.ExposuresByVersion,
		ExposuresByAgentTime: e.ExposuresByTime, Recurrences: e.Recurrences, RateAfter: e.RateAfter,
		RateAfterInterval: intervalToProto(e.RateAfterInterval), BeforeDecisions: e.BeforeDecisions,
		BeforeRecurrences: e.BeforeRecurrences, RateBefore: e.RateBefore, RateBeforeInterval: intervalToProto(e.RateBeforeInterval),
		Change: e.Change, ChangeInterval: intervalToProto(e.ChangeInterval), Validations: e.Validations,
		Method: effect.Method, Verdict: e.Verdict, Summary: e.Summary, LastExposure: tsOrNil(e.LastExposure),
		LastValidation: tsOrNil(e.LastValidation), ComputedAt: tsOrNil(e.ComputedAt),
		Reason: e.Reason, BeforeEvidenceLeftOut: e.BeforeEvidenceLeftOut, RateBeforeWithEvidence: e.RateBeforeWithEvidence,
	}
	if s := e.Shadow; s != nil {
		out.Shadow = &preceptv1.ShadowComparison{
			ShadowDecisions: s.ShadowDecisions, ShadowRecurrences: s.ShadowRecurrences, ShadowRate: s.ShadowRate,
			ShadowInterval: intervalToProto(s.ShadowInterval), MainDecisions: s.MainDecisions, MainRecurrences: s.MainRecurrences,
			MainRate: s.MainRate, MainInterval: intervalToProto(s.MainInterval), Change: s.Change, ChangeInterval: intervalToProto(s.ChangeInterval),
		}
	}
	return out
}
