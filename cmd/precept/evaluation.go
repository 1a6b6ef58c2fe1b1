package main

import (
	"fmt"
	"io"
	"strings"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

func printEvaluation(w io.Writer, ev *preceptv1.Evaluation) {
	action := ""
	if a := ev.GetProposedAction(); a != nil && a.GetType() != preceptv1.ActionType_ACTION_TYPE_UNSPECIFIED {
		action = strings.TrimPrefix(a.GetType().String(), "ACTION_TYPE_")
		if a.GetPriority() != "" {
			action += " (" + a.GetPriority() + " priority)"
		}
		if a.GetProposalId() != "" {
			action += ", proposal " + a.GetProposalId()
		}
	}
	fields(w,
		"class", fmt.Sprintf("%s (confidence %.2f)", className(ev.GetClassification()), ev.GetConfidence()),
		"rationale", ev.GetRationale(),
		"cluster", ev.GetClusterId(),
		"similar", strings.Join(ev.GetSimilarFeedbackIds(), ", "),
		"action", action,
		"evaluator", ev.GetEvaluator(),
	)
}
