package app

import (
	"context"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api"
)

// serveExport serves ExportService over the feedback store and the
// evaluator, with the salt of anonymized exports (export.salt). Rule
// effects come from RuleEffects when it is set, else from the learning
// loop: every rule's, retired ones included, as ListRuleEffects reports
// them; with the loop off, exports have none and say so.
func (a *App) serveExport() {
	effects := func(ctx context.Context) ([]*preceptv1.RuleEffect, error) {
		switch {
		case a.RuleEffects != nil:
			return a.RuleEffects(ctx)
		case a.Effects == nil:
			return nil, api.ErrNoRuleEffects
		}
		svc := &api.EffectService{Effects: a.Effects, Retired: a.Rules.Upkeep().RetiredRules, Log: a.Log}
		resp, err := svc.ListRuleEffects(ctx, connect.NewRequest(&preceptv1.ListRuleEffectsRequest{IncludeRetired: true}))
		if err != nil {
			return nil, err
		}
		return resp.Msg.GetEffects(), nil
	}
	a.Handle(preceptv1connect.NewExportServiceHandler(api.NewExportService(a.Feedback, a.Evaluator, api.ExportOptions{
		RuleEffects: effects,
		Proposals:   a.Rules,
		Salt:        a.Config.Export.Salt,
		Log:         a.Log,
	}), a.ConnectOptions()...))
}
