package evaluator

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/precept-dev/precept/lib/english"
)

// Approval polarity (docs/thresholds.md, "Clarity rubric"): an approval
// is negative feedback only when its comment explicitly asks for a
// change to this output. Thanks, praise and context never count. A
// strong request ("please", "nit:", "could you", "next time") always
// does. A weak one ("should", "instead", "missing") counts unless its
// sentence hedges ("I guess this should probably …") or the reviewer
// accepts the output after it ("… but fine as is for now", "so I'm
// approving"). A connective ("but", "however") is no request by itself.

// approvalSpec is the YAML form of what reads an approval's comment.
type approvalSpec struct {
	// StrongRequestCues and StrongRequestPatterns ask for a change
	// whatever follows.
	StrongRequestCues     []string `yaml:"strong_request_cues"`
	StrongRequestPatterns []string `yaml:"strong_request_patterns"`
	// Hedges in a sentence make its weak request the reviewer's musing.
	Hedges []string `yaml:"hedges"`
	// Acceptances after a weak request take it back.
	Acceptances []string `yaml:"acceptances"`
}

// approvalReader reads an approval's comment.
type approvalReader struct {
	strong map[string]bool
	// weak finds the rubric's request cues and patterns.
	weak               []*regexp.Regexp
	strongPatterns     []*regexp.Regexp
	hedges, acceptance []*regexp.Regexp
}

func newApprovalReader(s approvalSpec, cues []string, patterns []*regexp.Regexp) (approvalReader, error) {
	a := approvalReader{strong: wordSet(s.StrongRequestCues), weak: patterns}
	if len(cues) > 0 {
		quoted := make([]string, len(cues))
		for i, c := range cues {
			quoted[i] = regexp.QuoteMeta(strings.ToLower(c))
		}
		// A cue is a whole word: not inside another, nor a part of a
		// hyphenated or contracted one.
		a.weak = append([]*regexp.Regexp{regexp.MustCompile(`(?:^|[^\w'’-])(` + strings.Join(quoted, "|") + `)(?:$|[^\w'’-])`)}, patterns...)
	}
	for _, l := range []struct {
		name string
		src  []string
		dst  *[]*regexp.Regexp
	}{{"strong request pattern", s.StrongRequestPatterns, &a.strongPatterns}, {"hedge", s.Hedges, &a.hedges}, {"acceptance", s.Acceptances, &a.acceptance}} {
		res, err := compileAll(l.name, l.src)
		if err != nil {
			return a, err
		}
		*l.dst = res
	}
	return a, nil
}

// sentenceEnd splits a comment into sentences and lines.
var sentenceEnd = regexp.MustCompile(`[.!?;]+(\s|$)|\n+`)

// AsksForChange reports whether an approving comment still asks for a
// change, and the words that show it.
func (r *Rubric) AsksForChange(comment string) (bool, string) {
	lower := strings.ToLower(comment)
	for _, re := range r.approval.strongPatterns {
		if m := re.FindString(lower); m != "" {
			return true, m
		}
	}
	sentences := sentenceEnd.Split(lower, -1)
	for i, s := range sentences {
		for _, w := range english.Tokens(s, rubricWords) {
			if r.approval.strong[w] {
				return true, w
			}
		}
		if r.approval.any(r.approval.hedges, s) {
			continue
		}
		cue, at := r.approval.weakRequest(s)
		if cue == "" {
			continue
		}
		// Accepted in the rest of the sentence or in a later one.
		if r.approval.any(r.approval.acceptance, s[at:]) || r.approval.any(r.approval.acceptance, strings.Join(sentences[i+1:], "\n")) {
			continue
		}
		return true, cue
	}
	return false, ""
}

// weakRequest returns the first weak request cue of a sentence and
// where it ends, or "".
func (a approvalReader) weakRequest(s string) (string, int) {
	best, end := "", -1
	for _, re := range a.weak {
		loc := re.FindStringSubmatchIndex(s)
		if loc == nil {
			continue
		}
		// The cue is the first group when there is one.
		from, to := loc[0], loc[1]
		if len(loc) >= 4 && loc[2] >= 0 {
			from, to = loc[2], loc[3]
		}
		if end < 0 || to < end {
			best, end = s[from:to], to
		}
	}
	return best, max(end, 0)
}

func (a approvalReader) any(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// compileAll compiles case-insensitive patterns of a rubric list.
func compileAll(name string, src []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(src))
	for _, p := range src {
		re, err := regexp.Compile("(?i)" + p)
		if err != nil {
			return nil, fmt.Errorf("parse rubric: %s %q: %w", name, p, err)
		}
		out = append(out, re)
	}
	return out, nil
}
