package evaluator

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
)

// evaluateTemplateText is the fixed prompt of the LLM refinement; it
// ships in the binary and changes only through review.
//
//go:embed evaluate.tmpl
var evaluateTemplateText string

var evaluateTemplate = template.Must(template.New("evaluate.tmpl").Parse(evaluateTemplateText))

// llmVerdict is the JSON the evaluate template asks for.
type llmVerdict struct {
	Classification string   `json:"classification"`
	Confidence     *float64 `json:"confidence"`
	Rationale      string   `json:"rationale"`
}

// errUpgradeRefused marks an LLM answer that tried to raise the class.
var errUpgradeRefused = errors.New("the LLM tried to raise the classification")

// maxRationale bounds what an LLM may put into an evaluation.
const maxRationale = 1000

// refine lets the LLM, when one is configured, explain a decision and
// lower its class; it may never raise it past what the cluster statistics
// support. Any failure leaves the deterministic evaluation as it is
// (fail-open) and is logged.
func (s *Service) refine(ctx context.Context, d precept.Decision, cl *Cluster, similar []similarText, ev *Evaluation) {
	if s.opts.LLM == nil || ev.Class.rank() < EdgeCase.rank() {
		return
	}
	prompt, err := s.evaluatePrompt(d, cl, similar, ev)
	if err == nil {
		var out string
		cctx, cancel := context.WithTimeout(ctx, s.opts.LLMTimeout)
		out, err = s.opts.LLM.Complete(cctx, prompt)
		cancel()
		if err == nil {
			err = s.applyVerdict(out, ev)
		}
	}
	if errors.Is(err, errUpgradeRefused) {
		// The statistics' result stands, noted in the rationale.
		return
	}
	if err != nil {
		s.m.LLMRefinement(LLMFallback)
		s.log.Warn("LLM evaluation failed; keeping the deterministic result", "decision_id", d.DecisionID, "err", err)
		return
	}
	s.m.LLMRefinement(LLMUsed)
	ev.Evaluator = "llm:" + s.opts.LLM.Model()
}

// similarText is a similar comment shown to the LLM.
type similarText struct{ ReviewerID, EpicID, Text string }

func (s *Service) evaluatePrompt(d precept.Decision, cl *Cluster, similar []similarText, ev *Evaluation) (string, error) {
	data := struct {
		Agent, Verdict, Comment, Correction string
		ClusterSize, DistinctReviewers      int
		DistinctEpics                       int
		Similar                             []similarText
		Ceiling                             Class
	}{Agent: d.Agent, Verdict: string(d.Decision), Comment: d.ReviewerComment, Correction: precept.CorrectionSummary(d.CorrectionDiff), Similar: similar, Ceiling: ev.Class}
	st := cl.Stats()
	data.ClusterSize, data.DistinctReviewers, data.DistinctEpics = st.Size, st.DistinctReviewers, st.DistinctEpics
	var buf bytes.Buffer
	if err := evaluateTemplate.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("render evaluate template: %w", err)
	}
	return buf.String(), nil
}

var classes = map[string]Class{
	"AMBIGUOUS": Ambiguous, "EDGE_CASE": EdgeCase, "GENERALIZABLE_LOW": GeneralizableLow, "GENERALIZABLE_HIGH": GeneralizableHigh,
}

// applyVerdict validates the LLM's answer and applies it within the
// ceiling the statistics set.
func (s *Service) applyVerdict(out string, ev *Evaluation) error {
	raw := extractJSON(out)
	if raw == "" {
		return errors.New("no JSON object in the answer")
	}
	var v llmVerdict
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("malformed answer: %w", err)
	}
	class, ok := classes[strings.ToUpper(strings.TrimSpace(v.Classification))]
	switch {
	case !ok:
		return fmt.Errorf("unknown classification %q", v.Classification)
	case v.Confidence == nil || *v.Confidence < 0 || *v.Confidence > 1:
		return errors.New("confidence missing or outside [0, 1]")
	case strings.TrimSpace(v.Rationale) == "":
		return errors.New("empty rationale")
	}
	ceiling := ev.Class
	rationale := text.TruncateTrim(strings.TrimSpace(v.Rationale), maxRationale)
	if class.rank() > ceiling.rank() {
		s.m.LLMRefinement(LLMUpgradeRefused)
		s.log.Warn("LLM tried to raise a classification past the cluster statistics; kept the statistics' class",
			"decision_id", ev.DecisionID, "llm", class, "ceiling", ceiling)
		ev.Rationale += " (An LLM proposed " + string(class) + ", which the statistics do not support.)"
		return errUpgradeRefused
	}
	if class != ceiling {
		ev.Class = class
		ev.Rationale = rationale + " (Lowered by an LLM from " + string(ceiling) + ".)"
		switch class {
		case Ambiguous:
			ev.Action, ev.NeedsReview = nil, true
		case EdgeCase:
			ev.Action = &Action{Type: DocumentOnly, TargetAgent: ev.Action.TargetAgent}
		case GeneralizableLow:
			ev.Action.Priority = "low"
		}
	} else {
		ev.Rationale = rationale + " " + ev.Rationale
	}
	ev.Confidence = round2(*v.Confidence)
	return nil
}

// extractJSON returns the first balanced JSON object in s, tolerating
// code fences and prose around it.
func extractJSON(s string) string {
	start := strings.IndexByte(s, '{')
	if start < 0 {
		return ""
	}
	depth, inString, escaped := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\' && inString:
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return s[start : i+1]
			}
		}
	}
	return ""
}
