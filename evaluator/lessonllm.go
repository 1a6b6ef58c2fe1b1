package evaluator

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
)

// lessonTemplateText is the fixed prompt of LLM lesson extraction
// (docs/lessons.md); it ships in the binary and changes only by review.
//
//go:embed lesson.tmpl
var lessonTemplateText string

var lessonTemplate = template.Must(template.New("lesson.tmpl").Parse(lessonTemplateText))

// llmLesson is the JSON the lesson template asks for.
type llmLesson struct {
	Category string `json:"category"`
	Problem  string `json:"problem"`
	Desired  string `json:"desired"`
}

// maxLessonSentence bounds what an LLM may put into a lesson.
const maxLessonSentence = 300

var proposedID = regexp.MustCompile(`^new:([a-z][a-z0-9]*(-[a-z0-9]+)*)$`)

// learn reduces a decision to its lesson: deterministically, then — when
// an LLM is configured — by the LLM, validated against the taxonomy. Any
// failure of the LLM leaves the deterministic lesson (fail-open).
func (s *Service) learn(ctx context.Context, d precept.Decision) lesson.Lesson {
	c := s.opts.Lessons.Classifier()
	l := c.Learn(d)
	if s.opts.LLM == nil {
		return l
	}
	refined, err := s.llmLesson(ctx, c, d, l)
	if err != nil {
		s.m.LLMRefinement(LLMFallback)
		s.log.Warn("LLM lesson extraction failed; keeping the deterministic lesson", "decision_id", d.DecisionID, "err", err)
		return l
	}
	s.m.LLMRefinement(LLMUsed)
	return refined
}

func (s *Service) llmLesson(ctx context.Context, c *lesson.Classifier, d precept.Decision, l lesson.Lesson) (lesson.Lesson, error) {
	data := struct {
		Agent, Comment, Correction, Suggested string
		Categories                            []lesson.Category
	}{Agent: d.Agent, Comment: safetext.Redact(d.ReviewerComment), Correction: safetext.Redact(precept.CorrectionSummary(d.CorrectionDiff)),
		Suggested: l.Category, Categories: c.Taxonomy().Categories}
	var buf bytes.Buffer
	if err := lessonTemplate.Execute(&buf, data); err != nil {
		return l, fmt.Errorf("render lesson template: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.LLMTimeout)
	answer, err := s.opts.LLM.Complete(cctx, buf.String())
	cancel()
	if err != nil {
		return l, err
	}
	raw := extractJSON(answer)
	if raw == "" {
		return l, errors.New("no JSON object in the answer")
	}
	var v llmLesson
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return l, fmt.Errorf("malformed answer: %w", err)
	}
	v.Category = strings.TrimSpace(v.Category)
	by := "llm:" + s.opts.LLM.Model()
	clean := func(s string) string {
		return text.TruncateTrim(strings.TrimSpace(safetext.StripControls(safetext.Redact(s))), maxLessonSentence)
	}
	switch m := proposedID.FindStringSubmatch(v.Category); {
	case v.Category == lesson.Unclear:
		out := l
		out.Category, out.Problem, out.Desired, out.Protected, out.By = lesson.Unclear, "", "", false, by
		out.Evidence = []lesson.Evidence{{Kind: lesson.EvidenceLLM, Text: by}}
		return out, nil
	case m != nil:
		// A category the taxonomy lacks: the deterministic lesson stands,
		// and the proposal waits for a curator.
		out := l
		out.Proposed = m[1] + ": " + clean(v.Problem)
		return out, nil
	}
	out, ok := c.WithCategory(l, v.Category, by)
	if !ok {
		return l, fmt.Errorf("category %q is not in the taxonomy", v.Category)
	}
	out.Confidence = l.Confidence
	if out.Category != l.Category {
		// The deterministic evidence was for another category.
		out.Evidence = []lesson.Evidence{{Kind: lesson.EvidenceLLM, Text: by}}
	}
	if p := clean(v.Problem); p != "" {
		out.Problem = p
	}
	if d := clean(v.Desired); d != "" {
		out.Desired = d
	}
	return out, nil
}
