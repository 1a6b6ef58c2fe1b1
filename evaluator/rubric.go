package evaluator

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/english"
	"github.com/precept-dev/precept/lib/reload"
)

//go:embed rubric.yaml
var defaultRubricYAML []byte

// RubricAttribute is one attribute of the clarity rubric as scored.
type RubricAttribute struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Present     bool    `json:"present"`
	Confidence  float64 `json:"confidence,omitempty"`
	// Evidence is what showed the attribute, for a human to check.
	Evidence string `json:"evidence,omitempty"`
}

// RubricResult is the clarity rubric applied to a negative decision.
type RubricResult struct {
	Attributes    []RubricAttribute `json:"attributes"`
	Met           int               `json:"met"`
	Required      int               `json:"required"`
	Confidence    float64           `json:"confidence"`
	MinConfidence float64           `json:"min_confidence"`
	Passed        bool              `json:"passed"`
	Missing       []string          `json:"missing,omitempty"`
	// RequiredAttributes must be present whatever the count.
	RequiredAttributes []string `json:"required_attributes,omitempty"`
}

// rubricSpec is the YAML form of the rubric.
type rubricSpec struct {
	MinMet          int     `yaml:"min_met"`
	MinConfidence   float64 `yaml:"min_confidence"`
	MinContentWords int     `yaml:"min_content_words"`
	// Required attributes must be present whatever the count.
	Required   []string `yaml:"required"`
	Confidence struct {
		Explicit float64 `yaml:"explicit"`
		Fields   float64 `yaml:"fields"`
		Inferred float64 `yaml:"inferred"`
		// Lesson is the confidence of what a lesson's category shows.
		Lesson float64 `yaml:"lesson"`
	} `yaml:"confidence"`
	Attributes []struct {
		Name        string   `yaml:"name"`
		Description string   `yaml:"description"`
		Cues        []string `yaml:"cues"`
		Patterns    []string `yaml:"patterns"`
		Inferred    []string `yaml:"inferred"`
		ImpliedBy   []string `yaml:"implied_by"`
		Fields      []string `yaml:"fields"`
		// Lesson names what of the decision's lesson shows the
		// attribute: problem (its category), why (the category says why
		// it matters) or desired (what the reviewer asked, else the
		// category's canonical rule).
		Lesson string `yaml:"lesson"`
	} `yaml:"attributes"`
	RequestCues     []string `yaml:"request_cues"`
	RequestPatterns []string `yaml:"request_patterns"`
	// Approval says how an approval's comment is read (approval.go).
	Approval   approvalSpec `yaml:"approval"`
	StopWords  []string     `yaml:"stop_words"`
	VagueWords []string     `yaml:"vague_words"`
}

// Rubric scores how clearly negative feedback says what was wrong, where,
// why, and what was wanted (docs/thresholds.md, "Clarity rubric").
type Rubric struct {
	minMet, minContent                 int
	minConfidence                      float64
	explicit, fields, inferred, lesson float64
	attrs                              []rubricAttr
	required                           []string
	stop, vague                        map[string]bool
	requestPatterns                    []*regexp.Regexp
	approval                           approvalReader
}

type rubricAttr struct {
	name, description string
	cues              map[string]bool
	patterns          []*regexp.Regexp
	inferred          []*regexp.Regexp
	impliedBy         []string
	fields            []string
	lesson            string
}

var knownFields = map[string]func(precept.Decision) string{
	"correction_diff":      func(d precept.Decision) string { return d.CorrectionDiff },
	"correction_diff_path": func(d precept.Decision) string { return d.CorrectionDiffPath },
	"scope_path":           func(d precept.Decision) string { return d.ScopePath },
	"agent":                func(d precept.Decision) string { return d.Agent },
	"approved_output":      func(d precept.Decision) string { return d.ApprovedOutput },
}

// ParseRubric reads a rubric from YAML, checking it completely.
func ParseRubric(data []byte) (*Rubric, error) {
	var spec rubricSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("parse rubric: %w", err)
	}
	if len(spec.Attributes) == 0 {
		return nil, errors.New("parse rubric: no attributes")
	}
	if spec.MinMet < 1 || spec.MinMet > len(spec.Attributes) {
		return nil, fmt.Errorf("parse rubric: min_met %d is outside 1..%d", spec.MinMet, len(spec.Attributes))
	}
	for name, v := range map[string]float64{"min_confidence": spec.MinConfidence, "confidence.explicit": spec.Confidence.Explicit,
		"confidence.fields": spec.Confidence.Fields, "confidence.inferred": spec.Confidence.Inferred, "confidence.lesson": spec.Confidence.Lesson} {
		if v < 0 || v > 1 {
			return nil, fmt.Errorf("parse rubric: %s %v is outside [0, 1]", name, v)
		}
	}
	r := &Rubric{
		minMet: spec.MinMet, minContent: spec.MinContentWords, minConfidence: spec.MinConfidence,
		explicit: spec.Confidence.Explicit, fields: spec.Confidence.Fields, inferred: spec.Confidence.Inferred, lesson: spec.Confidence.Lesson,
		stop: wordSet(spec.StopWords), vague: wordSet(spec.VagueWords),
	}
	for _, p := range spec.RequestPatterns {
		re, err := regexp.Compile("(?i)" + p)
		if err != nil {
			return nil, fmt.Errorf("parse rubric: request pattern %q: %w", p, err)
		}
		r.requestPatterns = append(r.requestPatterns, re)
	}
	var err error
	if r.approval, err = newApprovalReader(spec.Approval, spec.RequestCues, r.requestPatterns); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, a := range spec.Attributes {
		if a.Name == "" || seen[a.Name] {
			return nil, fmt.Errorf("parse rubric: attributes[%d]: missing or duplicate name %q", i, a.Name)
		}
		seen[a.Name] = true
		ra := rubricAttr{name: a.Name, description: a.Description, cues: wordSet(a.Cues), fields: a.Fields, impliedBy: a.ImpliedBy, lesson: a.Lesson}
		switch a.Lesson {
		case "", lessonProblem, lessonWhy, lessonDesired:
		default:
			return nil, fmt.Errorf("parse rubric: attribute %s: lesson %q is not problem, why or desired", a.Name, a.Lesson)
		}
		for _, f := range a.Fields {
			if knownFields[f] == nil {
				return nil, fmt.Errorf("parse rubric: attribute %s: unknown field %q", a.Name, f)
			}
		}
		for _, list := range []struct {
			src []string
			dst *[]*regexp.Regexp
		}{{a.Patterns, &ra.patterns}, {a.Inferred, &ra.inferred}} {
			for _, p := range list.src {
				re, err := regexp.Compile("(?i)" + p)
				if err != nil {
					return nil, fmt.Errorf("parse rubric: attribute %s: pattern %q: %w", a.Name, p, err)
				}
				*list.dst = append(*list.dst, re)
			}
		}
		r.attrs = append(r.attrs, ra)
	}
	for _, name := range spec.Required {
		if !seen[name] {
			return nil, fmt.Errorf("parse rubric: required names %q, not an attribute", name)
		}
	}
	r.required = spec.Required
	for _, a := range r.attrs {
		for _, other := range a.impliedBy {
			if !seen[other] || other == a.name {
				return nil, fmt.Errorf("parse rubric: attribute %s: implied_by names %q, not another attribute", a.name, other)
			}
		}
	}
	return r, nil
}

// DefaultRubric returns the built-in rubric.
func DefaultRubric() *Rubric {
	r, err := ParseRubric(defaultRubricYAML)
	if err != nil {
		panic("built-in rubric: " + err.Error())
	}
	return r
}

func wordSet(words []string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[strings.ToLower(w)] = true
	}
	return m
}

// rubricWords is how the rubric reads a comment: apostrophes, hyphens
// and underscores stay in words ("isn't", "hard-coded", "max_retries"),
// as the rubric's cue lists write them.
var rubricWords = english.Options{Keep: "'’-_"}

// What of a lesson can show an attribute.
const (
	lessonProblem = "problem"
	lessonWhy     = "why"
	lessonDesired = "desired"
)

// direct scores one attribute from the comment, the event's fields and
// the decision's lesson.
func (r *Rubric) direct(a rubricAttr, d precept.Decision, l lesson.Lesson, comment string, ws []string, useComment bool) RubricAttribute {
	attr := RubricAttribute{Name: a.name, Description: a.description}
	consider := func(conf float64, ev string) {
		if conf > attr.Confidence {
			attr.Present, attr.Confidence, attr.Evidence = true, conf, ev
		}
	}
	// A lesson read from a comment that names nothing ("not sure about
	// this") shows nothing, whatever category won; one read from tags, a
	// diff or a model does.
	if l.Known() && (useComment || lessonBeyondComment(l)) {
		switch a.lesson {
		case lessonProblem:
			consider(r.lesson, fmt.Sprintf("category %s%s", l.Category, evidenceNote(l)))
		case lessonWhy:
			consider(r.inferred, fmt.Sprintf("category %s: %s", l.Category, l.Problem))
		case lessonDesired:
			if l.Asked != "" {
				consider(r.explicit, fmt.Sprintf("asked: %q", l.Asked))
			}
			consider(r.inferred, fmt.Sprintf("the canonical rule of %s", l.Category))
		}
	}
	if useComment {
		for _, w := range ws {
			if a.cues[w] {
				consider(r.explicit, fmt.Sprintf("%q in the comment", w))
				break
			}
		}
		for _, re := range a.patterns {
			if m := re.FindString(comment); m != "" {
				consider(r.explicit, fmt.Sprintf("%q in the comment", m))
				break
			}
		}
		for _, re := range a.inferred {
			if m := re.FindString(comment); m != "" {
				consider(r.inferred, fmt.Sprintf("implied by %q", m))
				break
			}
		}
	}
	for _, f := range a.fields {
		if v := knownFields[f](d); strings.TrimSpace(v) != "" {
			consider(r.fields, "the event's "+f)
			break
		}
	}
	return attr
}

// lessonBeyondComment reports whether a lesson rests on more than the
// comment's words: a tag, an error category, a diff, a model or a curator.
func lessonBeyondComment(l lesson.Lesson) bool {
	if l.By != "" && l.By != "deterministic" {
		return true
	}
	for _, e := range l.Evidence {
		switch e.Kind {
		case lesson.EvidenceTag, lesson.EvidenceErrorCategory, lesson.EvidenceDiff, lesson.EvidenceLLM:
			return true
		}
	}
	return false
}

// evidenceNote quotes the first piece of a lesson's evidence.
func evidenceNote(l lesson.Lesson) string {
	if len(l.Evidence) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s %q)", l.Evidence[0].Kind, l.Evidence[0].Text)
}

// Score applies the rubric to a negative decision and its lesson.
func (r *Rubric) Score(d precept.Decision, l lesson.Lesson) RubricResult {
	comment := strings.TrimSpace(d.ReviewerComment)
	ws := english.Tokens(comment, rubricWords)
	content := 0
	for _, w := range ws {
		w = strings.Trim(w, "'’-_")
		if len(w) > 1 && !r.stop[w] && !r.vague[w] {
			content++
		}
	}
	// Comment evidence counts only when the comment names something:
	// "fix this" or "wrong" says nothing to learn from.
	useComment := content >= r.minContent && comment != ""

	res := RubricResult{Required: r.minMet, MinConfidence: r.minConfidence, RequiredAttributes: slices.Clone(r.required)}
	found := make([]RubricAttribute, len(r.attrs))
	explicitly := map[string]bool{}
	for i, a := range r.attrs {
		found[i] = r.direct(a, d, l, comment, ws, useComment)
		if found[i].Present && found[i].Confidence >= r.explicit {
			explicitly[a.name] = true
		}
	}
	var sum float64
	for i, a := range r.attrs {
		attr := found[i]
		if !attr.Present && useComment {
			// Implied only by what the comment states outright, so two
			// inferences never prop each other up.
			for _, other := range a.impliedBy {
				if explicitly[other] {
					attr.Present, attr.Confidence, attr.Evidence = true, r.inferred, "implied by the "+strings.ReplaceAll(other, "_", " ")
					break
				}
			}
		}
		if attr.Present {
			res.Met++
			sum += attr.Confidence
		} else {
			res.Missing = append(res.Missing, a.name)
		}
		res.Attributes = append(res.Attributes, attr)
	}
	if res.Met > 0 {
		res.Confidence = round2(sum / float64(res.Met))
	}
	res.Passed = res.Met >= r.minMet && res.Confidence >= r.minConfidence
	for _, name := range r.required {
		if slices.Contains(res.Missing, name) {
			res.Passed = false
		}
	}
	return res
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }

// RubricSource serves the rubric, re-reading its file when it changes.
type RubricSource struct{ f *reload.File[*Rubric] }

// NewRubricSource returns the built-in rubric when path is empty, else
// the rubric in the file, which must be valid now.
func NewRubricSource(path string) (*RubricSource, error) {
	if path == "" {
		return builtinRubric(), nil
	}
	f, err := reload.New("rubric file", path, DefaultRubric(), ParseRubric)
	if err != nil {
		return nil, err
	}
	return &RubricSource{f}, nil
}

// builtinRubric is the source of the built-in rubric; it reads no file.
func builtinRubric() *RubricSource { return &RubricSource{reload.Fixed(DefaultRubric())} }

// Rubric returns the current rubric, first re-reading the file if it
// changed. A file that stops parsing keeps the last good rubric in use;
// LastError says why.
func (s *RubricSource) Rubric() *Rubric { return s.f.Get() }

// LastError returns why the last reload failed, or nil.
func (s *RubricSource) LastError() error { return s.f.Err() }

// Status re-reads the file when it changed and says how its reloads
// went, for the service to log, count and report.
func (s *RubricSource) Status() reload.Status { return s.f.Status() }
