package main

import (
	"fmt"
	"io"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

func effectClient(c *cli) preceptv1connect.EffectServiceClient {
	return preceptv1connect.NewEffectServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
}

func rulesEffectCmd(c *cli) *cobra.Command {
	var agent string
	var retired bool
	cmd := &cobra.Command{
		Use:   "effect [RULE_ID] [--agent NAME] [--retired]",
		Short: "Show whether rules help: recurrences of their failure pattern before and after, with 95% intervals",
		Long: "With a RULE_ID, one rule's effect in full; without, a table of every rule on main (of one agent with --agent;\n" +
			"with --retired also rules that left main). Figures are computed now from the decisions stored (docs/effects.md).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := c.ctx(cmd)
			defer cancel()
			if len(args) == 1 {
				if agent != "" || retired {
					return usagef("effect RULE_ID takes no --agent or --retired")
				}
				resp, err := effectClient(c).GetRuleEffect(ctx, connect.NewRequest(&preceptv1.GetRuleEffectRequest{RuleId: args[0]}))
				if err != nil {
					return err
				}
				return c.emit(resp.Msg, func(w io.Writer) { printEffect(w, resp.Msg.GetEffect()) })
			}
			resp, err := effectClient(c).ListRuleEffects(ctx, connect.NewRequest(&preceptv1.ListRuleEffectsRequest{Agent: agent, IncludeRetired: retired}))
			if err != nil {
				return err
			}
			return c.emit(resp.Msg, func(w io.Writer) {
				var rows [][]string
				for _, e := range resp.Msg.GetEffects() {
					rows = append(rows, []string{
						e.GetRuleId(), ruleStatus(e.GetStatus()), strings.Join(e.GetAgents(), ","), fmt.Sprint(e.GetExposures()),
						rateText(e.GetRecurrences(), e.GetExposures(), e.GetRateAfter()),
						rateText(e.GetBeforeRecurrences(), e.GetBeforeDecisions(), e.GetRateBefore()),
						changeText(e.GetChange(), e.GetChangeInterval()), fmt.Sprint(e.GetValidations()),
						strings.TrimPrefix(e.GetImportance().String(), "IMPORTANCE_"), e.GetVerdict(), e.GetReason(),
					})
				}
				table(w, []string{"RULE", "STATUS", "AGENTS", "EXPOSED", "AFTER", "BEFORE", "CHANGE (95% CI)", "VALID", "IMPORTANCE", "VERDICT", "WHY"}, rows)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's rules")
	cmd.Flags().BoolVar(&retired, "retired", false, "include rules that left main (sunset, rolled back, superseded)")
	return cmd
}

func rateText(k, n int64, rate float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d %.0f%%", k, n, 100*rate)
}

func changeText(change float64, ci *preceptv1.Interval) string {
	return fmt.Sprintf("%+.1f (%+.1f..%+.1f)", 100*change, 100*ci.GetLow(), 100*ci.GetHigh())
}

func attributionText(a preceptv1.Attribution) string {
	if a == preceptv1.Attribution_ATTRIBUTION_UNSPECIFIED {
		return "none yet"
	}
	return strings.ToLower(strings.TrimPrefix(a.String(), "ATTRIBUTION_"))
}

// printEffect shows one rule's effect; rules show uses it too.
func printEffect(w io.Writer, e *preceptv1.RuleEffect) {
	if e == nil {
		return
	}
	fields(w,
		"rule", e.GetRuleId(),
		"status", ruleStatus(e.GetStatus()),
		"agents", strings.Join(e.GetAgents(), ", "),
		"pattern", strings.TrimSpace(e.GetCategory()+" "+bracketed(e.GetClusterId())),
		"verdict", e.GetVerdict(),
		"why", e.GetReason(),
		"exposures", fmt.Sprintf("%d (%d by prompt_version, %d by agent and time; attribution: %s)", e.GetExposures(),
			e.GetExposuresByPromptVersion(), e.GetExposuresByAgentTime(), attributionText(e.GetAttribution())),
		"after", fmt.Sprintf("%s, 95%% CI %.1f%%–%.1f%%", rateText(e.GetRecurrences(), e.GetExposures(), e.GetRateAfter()),
			100*e.GetRateAfterInterval().GetLow(), 100*e.GetRateAfterInterval().GetHigh()),
		"before", fmt.Sprintf("%s, 95%% CI %.1f%%–%.1f%% (without its %d evidence decisions; %.0f%% with them)",
			rateText(e.GetBeforeRecurrences(), e.GetBeforeDecisions(), e.GetRateBefore()),
			100*e.GetRateBeforeInterval().GetLow(), 100*e.GetRateBeforeInterval().GetHigh(),
			e.GetBeforeEvidenceLeftOut(), 100*e.GetRateBeforeWithEvidence()),
		"change (points)", changeText(e.GetChange(), e.GetChangeInterval()),
		"validations", fmt.Sprint(e.GetValidations()),
		"importance", strings.TrimPrefix(e.GetImportance().String(), "IMPORTANCE_"),
		"confidence", fmt.Sprintf("%.3f", e.GetConfidence()),
		"last exposure", ts(e.GetLastExposure()),
		"last validation", ts(e.GetLastValidation()),
		"method", e.GetMethod(),
	)
	if s := e.GetShadow(); s != nil {
		fields(w,
			"shadow prompt", rateText(s.GetShadowRecurrences(), s.GetShadowDecisions(), s.GetShadowRate()),
			"main prompt", rateText(s.GetMainRecurrences(), s.GetMainDecisions(), s.GetMainRate()),
			"shadow − main", changeText(s.GetChange(), s.GetChangeInterval()),
		)
	}
	if e.GetSummary() != "" {
		fmt.Fprintf(w, "\n%s\n", indent(e.GetSummary()))
	}
}

func bracketed(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}
