package app

import (
	"context"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api"
)

// serveExport serves ExportService over the feedback store and the
// evaluator, with the salt of anonymized exports (export.salt) and the
// rule effects RuleEffects provides when the export runs.
func (a *App) serveExport() {
	effects := func(ctx context.Context) ([]*preceptv1.RuleEffect, error) {
		if a.RuleEffects == nil {
			return nil, api.ErrNoRuleEffects
		}
		return a.RuleEffects(ctx)
	}
	a.Handle(preceptv1connect.NewExportServiceHandler(api.NewExportService(a.Feedback, a.Evaluator, api.ExportOptions{
		RuleEffects: effects,
		Proposals:   a.Rules,
		Salt:        a.Config.Export.Salt,
		Log:         a.Log,
	}), a.ConnectOptions()...))
}
