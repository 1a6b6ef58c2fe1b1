package console

import (
	"fmt"
	"html/template"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// figure is a chart with its data (being replaced by chart.go).
type figure struct {
	ID, Title, Desc string
	SVG             template.HTML
	Header          []string
	Rows            [][]string
	Export          string
}

func ruleEffectFigure(e *preceptv1.RuleEffect) (figure, error) {
	return figure{ID: "effect", Title: "Recurrence before and after", Header: []string{"period", "rate"},
		Rows: [][]string{{"before", fmt.Sprint(e.GetRateBefore())}, {"after", fmt.Sprint(e.GetRateAfter())}}}, nil
}
