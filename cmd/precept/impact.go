package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// printImpact shows a proposal's impact preview (docs/lifecycle.md,
// "Impact preview").
func printImpact(w io.Writer, im *preceptv1.ImpactPreview) {
	if im == nil {
		return
	}
	if im.GetPending() {
		fmt.Fprintln(w, "\nImpact\n  pending: computed in the background, shown once ready")
		return
	}
	fmt.Fprintf(w, "\nImpact (at feedback position %d, %s)\n", im.GetFeedbackSeq(), ts(im.GetComputedAt()))
	cat := im.GetCategory()
	if cat == "" {
		cat = "no known category"
	}
	fields(w,
		"  category", cat,
		"  cluster", countsLine(im.GetCluster(), "negative"),
		"  addresses", countsLine(im.GetCategoryNegatives(), "negative")+" in the category",
		"  overcorrect", fmt.Sprintf("%s of %d in scope (%s)", countsLine(im.GetOverCorrect(), "approval"), im.GetApprovalsInScope(), scopeLine(im.GetScope())),
		"  replay", replayLine(im.GetReplay()),
	)
	for _, s := range im.GetSimilar() {
		rel := "similar"
		if s.GetOpposing() {
			rel = "OPPOSITE"
		}
		name := s.GetPath()
		if s.GetRuleId() != "" {
			name = s.GetRuleId() + " " + name
		}
		fmt.Fprintf(w, "  %-8s %s %s (%.2f): %s\n", rel, line(s.GetKind()), line(name), s.GetSimilarity(), line(clip(s.GetExcerpt(), 100)))
	}
	if n := im.GetSimilarLeftOut(); n > 0 {
		fmt.Fprintf(w, "  %d passages on main not compared (cap reached)\n", n)
	}
}

// countsLine says "4 negatives (coder 4; 2 epics)".
func countsLine(c *preceptv1.ImpactCounts, what string) string {
	n := c.GetTotal()
	out := fmt.Sprintf("%d %s", n, what)
	if n != 1 {
		out += "s"
	}
	if n == 0 {
		return out
	}
	var agents []string
	for _, a := range slices.Sorted(maps.Keys(c.GetByAgent())) {
		agents = append(agents, fmt.Sprintf("%s %d", a, c.GetByAgent()[a]))
	}
	nEpics := max(c.GetEpics(), int64(len(c.GetByEpic())))
	epics := fmt.Sprintf("%d epics", nEpics)
	if nEpics == 1 {
		epics = "1 epic"
	}
	return fmt.Sprintf("%s (%s; %s)", out, strings.Join(agents, ", "), epics)
}

func scopeLine(s *preceptv1.ImpactScope) string {
	orAny := func(xs []string) string {
		if len(xs) == 0 {
			return "any"
		}
		return strings.Join(xs, ", ")
	}
	return fmt.Sprintf("agents %s; gates %s; paths %s", orAny(s.GetAgents()), orAny(s.GetGates()), orAny(s.GetPathPrefixes()))
}

func replayLine(r *preceptv1.ImpactReplay) string {
	switch r.GetState() {
	case preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_OFF:
		return "off (no LLM configured)"
	case preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_PENDING:
		switch {
		case r.GetAttempts() > 0:
			return fmt.Sprintf("pending: %d failed (LLM unavailable), retry at %s", r.GetAttempts(), ts(r.GetRetryAt()))
		case r.GetRetryAt() != nil:
			return "pending: call budget spent until " + ts(r.GetRetryAt())
		}
		return "pending"
	case preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_DONE:
	default:
		return ""
	}
	figure := func(v float64, n int32) string {
		if n == 0 {
			return "– (n=0)"
		}
		return fmt.Sprintf("%.2f (n=%d)", v, n)
	}
	out := fmt.Sprintf("precision %s recall %s; %d calls by %s", figure(r.GetPrecision(), r.GetPrecisionN()), figure(r.GetRecall(), r.GetRecallN()),
		r.GetCalls(), r.GetModel())
	if lost := r.GetMalformed() + r.GetTimeouts() + r.GetErrors(); lost > 0 {
		out += fmt.Sprintf(", without a verdict: %d malformed, %d timed out, %d failed", r.GetMalformed(), r.GetTimeouts(), r.GetErrors())
	}
	if r.GetUnsafeSkipped() > 0 {
		out += fmt.Sprintf(", %d outputs not sent (text safety)", r.GetUnsafeSkipped())
	}
	if r.GetCapped() {
		out += ", call cap reached"
	}
	return out
}
