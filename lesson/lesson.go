package lesson

import (
	"regexp"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
)

// Lesson is what one clear negative decision teaches: the category of
// its problem, the problem and the desired behaviour in the taxonomy's
// canonical words, what the reviewer said and asked in their own, and the
// evidence that decided it (docs/lessons.md).
type Lesson struct {
	Category   string  `json:"category"`
	Confidence float64 `json:"confidence"`
	// Problem and Desired are the category's description and canonical
	// rule; empty for an unclear comment.
	Problem string `json:"problem,omitempty"`
	Desired string `json:"desired,omitempty"`
	// Said is the reviewer's sentence that names the problem; Asked the
	// one that prescribes the fix, when there is one.
	Said         string     `json:"said,omitempty"`
	Asked        string     `json:"asked,omitempty"`
	Evidence     []Evidence `json:"evidence,omitempty"`
	Alternatives []Match    `json:"alternatives,omitempty"`
	Protected    bool       `json:"protected,omitempty"`
	// Taxonomy is the version of the taxonomy that classified it; By says
	// who: "deterministic", "llm:<model>" or "curator:<id>".
	Taxonomy string `json:"taxonomy"`
	By       string `json:"by"`
	// Proposed is a category an LLM proposed for a problem the taxonomy
	// lacks ("id: problem"), for curators to add.
	Proposed string `json:"proposed,omitempty"`
}

// Known reports whether the lesson has a category.
func (l Lesson) Known() bool { return l.Category != "" && l.Category != Unclear }

// maxSentence bounds the reviewer's sentences a lesson keeps.
const maxSentence = 300

// InputOf is what the classifier reads of a decision.
func InputOf(d precept.Decision) Input {
	return Input{Comment: d.ReviewerComment, Diff: d.CorrectionDiff, DiffPath: d.CorrectionDiffPath, ScopePath: d.ScopePath,
		Tags: d.Tags, ErrorCategories: d.ErrorCategories, Agent: d.Agent}
}

// Learn reduces a decision to its lesson.
func (c *Classifier) Learn(d precept.Decision) Lesson {
	r := c.Classify(InputOf(d))
	l := Lesson{Category: r.Category, Confidence: r.Confidence, Evidence: r.Evidence, Alternatives: r.Alternatives, Taxonomy: c.tax.Version, By: "deterministic"}
	l.Said, l.Asked = splitComment(d.ReviewerComment)
	if cat, ok := c.tax.Category(r.Category); ok {
		l.Problem, l.Desired, l.Protected = cat.Description, cat.Rule, cat.Protected
	}
	return l
}

// WithCategory returns l moved to category id of c's taxonomy by who (a
// curator or a model), keeping what the reviewer said.
func (c *Classifier) WithCategory(l Lesson, id, by string) (Lesson, bool) {
	cat, ok := c.tax.Category(id)
	if !ok {
		return l, false
	}
	l.Category, l.Problem, l.Desired, l.Protected, l.By = cat.ID, cat.Description, cat.Rule, cat.Protected, by
	l.Confidence, l.Taxonomy = 1, c.tax.Version
	return l, true
}

var (
	sentenceEnd = regexp.MustCompile(`[.!?;]+(\s+|$)|\n+|\s+-\s+`)
	// prescriptive starts or contains words that ask for a change.
	prescriptive = regexp.MustCompile(`(?i)(^|\b)(please|pls|plz|should|shouldn't|must|need(s)? to|have to|has to|instead|use|add|prefer|avoid|make sure|ensure|remove|drop|replace|rename|move|extract|split|wrap|return|handle|always|never|don't|do not|can you|could you|would you|let's|let us|consider|switch to|go with)\b`)
)

// splitComment finds the sentence that names the problem and the one that
// asks for the fix. A one-sentence comment that does both is both.
func splitComment(comment string) (said, asked string) {
	var sentences []string
	for _, s := range sentenceEnd.Split(comment, -1) {
		if s = strings.TrimSpace(s); s != "" {
			sentences = append(sentences, s)
		}
	}
	for _, s := range sentences {
		switch {
		case prescriptive.MatchString(s):
			if asked == "" {
				asked = s
			}
		case said == "":
			said = s
		}
	}
	if said == "" && len(sentences) > 0 {
		said = sentences[0]
	}
	return text.TruncateTrim(said, maxSentence), text.TruncateTrim(asked, maxSentence)
}
