package rules

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/precept-dev/precept/lib/english"
	"regexp"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// LLM completes prompts; the langchaingo adapter in internal/llm
// implements it. Drafting works without one.
type LLM interface {
	// Complete returns the model's answer to prompt.
	Complete(ctx context.Context, prompt string) (string, error)
	// Model names the model, recorded on the proposals it drafts.
	Model() string
}

// draft is rule text drafted from evidence, before the guards.
type draft struct {
	Type    rulefmt.Type
	Content string
	// By is "extractive", "lesson" (the category's canonical rule) or
	// "llm:<model>".
	By string
	// Left are the clauses of the category's canonical rule a lesson
	// draft left out because no comment of the evidence asked for them.
	Left []string
	// Clauses say where each clause came from and which decisions ask
	// for it; nil when the drafter does not know (then attribute finds
	// out).
	Clauses []rulefmt.Clause
}

// draftTemplateName names the LLM prompt template beside this file.
const draftTemplateName = "draft_rule.tmpl"

// draftTemplateText is the fixed drafting prompt; it ships in the binary
// and changes only through review.
//
//go:embed draft_rule.tmpl
var draftTemplateText string

// Bounds on what the LLM prompt quotes from a cluster.
const (
	maxPromptComments    = 8
	maxPromptCommentRune = 500
)

func parseDraftTemplate() (*template.Template, error) {
	t, err := template.New(draftTemplateName).
		Funcs(template.FuncMap{"join": strings.Join}).
		Parse(draftTemplateText)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", draftTemplateName, err)
	}
	return t, nil
}

// draft writes the rule text: with the LLM when one is configured and its
// answer is valid, else extractively.
func (pol policy) draft(ctx context.Context, ev rulefmt.Evidence) draft {
	if pol.opts.LLM == nil {
		return extractiveDraft(ev)
	}
	prompt, err := renderDraftPrompt(pol.tmpl, ev, pol.opts.Quality)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, pol.opts.LLMTimeout)
		var answer string
		answer, err = pol.opts.LLM.Complete(cctx, prompt)
		cancel()
		if err == nil {
			var d draft
			if d, err = parseLLMDraft(answer, pol.opts.Quality); err == nil {
				d.By = "llm:" + pol.opts.LLM.Model()
				narrowed := narrowRule(ev)
				d.Left = narrowed.Left
				// The model's clauses are checked against the evidence
				// like anyone's; those it took from the kept guidance
				// are named as guidance.
				d.Clauses = attribute(d.Content, ev, guidanceClauses(ev, narrowed), rulefmt.SourceModel)
				return d
			}
		}
	}
	pol.log.Warn("LLM draft failed; using the extractive draft", "cluster_id", ev.ClusterID, "model", pol.opts.LLM.Model(), "err", err)
	return extractiveDraft(ev)
}

// draftPromptData is what the template sees.
type draftPromptData struct {
	// Category and CategoryRule are the cluster's lesson: the part of the
	// category's canonical rule the evidence names (narrowRule), which the
	// draft should specialise.
	Category, CategoryRule string
	Agents                 []string
	Size, Reviewers        int
	Epics                  int
	Class                  string
	Tags                   []string
	Comments               []string
	MinLength, MaxLength   int
}

// renderDraftPrompt fills the template. Comments are clipped and their
// delimiters neutralised: they are untrusted data.
func renderDraftPrompt(t *template.Template, ev rulefmt.Evidence, q Quality) (string, error) {
	data := draftPromptData{
		// The model specialises only what the evidence asks for.
		Category: ev.Category, CategoryRule: narrowRule(ev).Text,
		Agents: ev.Agents, Size: ev.Size, Reviewers: len(rulefmt.Distinct(ev.Reviewers)), Epics: len(rulefmt.Distinct(ev.Epics)),
		Class: ev.Class, Tags: ev.Tags, MinLength: q.MinLength, MaxLength: q.MaxLength,
	}
	for _, c := range ev.Comments {
		// Comments are untrusted: no secret reaches the model, and no
		// terminal control sequence.
		comment := strings.TrimSpace(safetext.Redact(safetext.StripControls(c.Text)))
		if comment == "" {
			continue
		}
		comment = strings.NewReplacer("<<<", "‹‹‹", ">>>", "›››").Replace(text.ClipRunes(comment, maxPromptCommentRune))
		data.Comments = append(data.Comments, comment)
		if len(data.Comments) == maxPromptComments {
			break
		}
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("render %s: %w", draftTemplateName, err)
	}
	return buf.String(), nil
}

// llmAnswer is the JSON the template asks for.
type llmAnswer struct {
	RuleType    string `json:"rule_type"`
	RuleContent string `json:"rule_content"`
}

// parseLLMDraft validates the model's answer: one JSON object (code
// fences and prose around it are tolerated) with a known rule type and
// rule text within the length bounds, without control characters, that
// reads as an instruction.
func parseLLMDraft(answer string, q Quality) (draft, error) {
	start, end := strings.Index(answer, "{"), strings.LastIndex(answer, "}")
	if start < 0 || end < start {
		return draft{}, errors.New("no JSON object in the answer")
	}
	var a llmAnswer
	dec := json.NewDecoder(strings.NewReader(answer[start : end+1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return draft{}, fmt.Errorf("malformed JSON: %w", err)
	}
	t := rulefmt.Type(strings.ToUpper(strings.TrimSpace(a.RuleType)))
	if !t.Valid() {
		return draft{}, fmt.Errorf("unknown rule_type %q", a.RuleType)
	}
	content := strings.TrimSpace(a.RuleContent)
	if n := utf8.RuneCountInString(content); n < q.MinLength || n > q.MaxLength {
		return draft{}, fmt.Errorf("rule_content has %d characters, want %d..%d", n, q.MinLength, q.MaxLength)
	}
	if r, _, bad := safetext.Control(content); bad {
		return draft{}, fmt.Errorf("rule_content holds the control character %s", safetext.Describe(r))
	}
	if !readsAsInstruction(content) {
		return draft{}, errors.New("rule_content does not read as an instruction")
	}
	return draft{Type: t, Content: content}, nil
}

// Bounds of the extractive draft: the instruction's length, and how many
// meaningful words a comment needs to be quoted as the problem to avoid.
const (
	maxInstructionRunes = 220
	minProblemWords     = 3
	// maxCommentRunes bounds the work spent on one comment.
	maxCommentRunes = 4000
)

// extractiveDraft writes a rule from the cluster's most central comments
// without a model: the first comment (most central first) that can be
// read as an instruction becomes one, e.g. "missing unit tests for the
// parser" → "Include unit tests for the parser.". When none can, the most
// central comment is kept as the problem to avoid. The rule text is the
// instruction alone: the evidence summary quotes the comments, and rule
// texts without quotes compare well when guarding against duplicates.
func extractiveDraft(ev rulefmt.Evidence) draft {
	if ev.CategoryRule != "" {
		return lessonDraft(ev)
	}
	var texts []string
	for _, c := range ev.Comments {
		if t := text.OneLine(safetext.StripControls(text.ClipRunes(c.Text, maxCommentRunes))); t != "" {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return draft{Type: rulefmt.NegativeExample, By: "extractive"}
	}
	for _, t := range texts {
		if s, typ, reason, ok := instructionWithReason(t); ok {
			if reason != "" {
				s += " Reviewers flagged: " + lowerFirst(reason) + "."
			}
			return draft{Type: typ, Content: s, By: "extractive", Clauses: attribute(s, ev, nil, rulefmt.SourceReviewers)}
		}
	}
	problem := lowerFirst(trimSentence(text.ClipWords(rulefmt.FirstSentence(texts[0]), maxInstructionRunes)))
	if contentWords(problem) < minProblemWords {
		// Nothing to learn from: an empty draft, which the quality gate
		// blocks.
		return draft{Type: rulefmt.NegativeExample, By: "extractive"}
	}
	content := "Avoid this problem reviewers keep flagging: " + problem + "."
	return draft{Type: rulefmt.NegativeExample, Content: content, By: "extractive", Clauses: attribute(content, ev, nil, rulefmt.SourceReviewers)}
}

// narrowRule is the part of the cluster's canonical rule that its
// comments, and what its reviewers asked for, support (lesson.Narrow).
func narrowRule(ev rulefmt.Evidence) lesson.Narrowed {
	said, _ := saidTexts(ev)
	return lesson.Narrow(text.OneLine(ev.CategoryRule), said)
}

// guidanceClauses are the kept clauses of the category's canonical rule,
// with the decisions that ask for each.
func guidanceClauses(ev rulefmt.Evidence, narrowed lesson.Narrowed) []rulefmt.Clause {
	_, by := saidTexts(ev)
	var out []rulefmt.Clause
	for _, k := range narrowed.Kept {
		out = append(out, rulefmt.Clause{Text: strings.TrimRight(k.Clause, ". "), Source: rulefmt.SourceGuidance, Category: ev.Category,
			Decisions: decisionsOf(k.Evidence, by, ev.ClusterID), Words: k.Words})
	}
	return out
}

// draftWords reads the words of a rule and a reviewer's request alike,
// hyphenated words and contractions whole.
var draftWords = english.Options{Keep: "'-"}

// lessonDraft drafts from the cluster's lesson: the clauses of the
// category's canonical rule that the evidence supports (lesson.Narrow),
// specialised by the first prescription of the cluster's own that says
// more than the rule, with the support behind it ("… — flagged 7 times
// by 5 reviewers in 4 epics"). When the evidence supports no clause of
// the canonical rule, the reviewers' own prescription is the rule, or
// else the extractive draft of their comments — so too when the kept
// clauses alone do not pass the quality gate; only when their words
// give no rule is the canonical rule kept whole, and the evidence guard
// then shows it goes beyond them.
func lessonDraft(ev rulefmt.Evidence) draft {
	narrowed := narrowRule(ev)
	clauses := guidanceClauses(ev, narrowed)
	rule := narrowed.Text
	if rule != "" && len(narrowed.Left) > 0 && DefaultQuality().Check(strings.TrimRight(rule, ". ")+supportText(ev)) != "" {
		// The kept clauses alone do not read as a rule ("Fix misspelled
		// identifiers …" reads as a statement to the gate): the
		// reviewers' words are the rule, or else the guidance whole.
		narrowed.Text, clauses, rule = "", nil, ""
	}
	if rule == "" {
		if d, ok := reviewersDraft(ev); ok {
			d.Left = narrowed.Left
			return d
		}
		rule = text.OneLine(ev.CategoryRule)
		clauses = []rulefmt.Clause{{Text: strings.TrimRight(rule, ". "), Source: rulefmt.SourceGuidance, Category: ev.Category}}
	}
	content := strings.TrimRight(rule, ". ")
	if spec, id, ok := askedPrescription(ev, rule, nil); ok {
		content += "; here: " + lowerFirst(strings.TrimRight(spec, ". "))
		clauses = append(clauses, rulefmt.Clause{Text: "here: " + lowerFirst(strings.TrimRight(spec, ". ")), Source: rulefmt.SourceReviewers,
			Decisions: decisionsOf([]int{0}, []string{id}, ev.ClusterID)})
	}
	return draft{Type: lessonType(ev), Content: content + supportText(ev), By: "lesson", Left: narrowed.Left, Clauses: clauses}
}

// reviewersDraft is a lesson draft in the reviewers' words alone: their
// first prescription, else the extractive draft of their comments,
// whichever the default quality gate accepts.
func reviewersDraft(ev rulefmt.Evidence) (draft, bool) {
	q := DefaultQuality()
	accepted := func(s string) bool { return q.Check(strings.TrimRight(s, ". ")+supportText(ev)) == "" }
	if spec, id, ok := askedPrescription(ev, "", accepted); ok {
		content := strings.TrimRight(spec, ". ")
		return draft{Type: lessonType(ev), Content: content + supportText(ev), By: "lesson",
			Clauses: []rulefmt.Clause{{Text: content, Source: rulefmt.SourceReviewers, Decisions: decisionsOf([]int{0}, []string{id}, ev.ClusterID)}}}, true
	}
	words := ev
	words.CategoryRule = ""
	d := extractiveDraft(words)
	if d.Content == "" || q.Check(d.Content) != "" {
		return draft{}, false
	}
	d.By = "lesson"
	return d, true
}

// askedPrescription is the first thing the cluster's reviewers asked for that
// reads as an instruction and says more than rule, with the decision it
// came from; accept, when set, must accept it too.
func askedPrescription(ev rulefmt.Evidence, rule string, accept func(string) bool) (string, string, bool) {
	ruleWords := map[string]bool{}
	for _, w := range english.Tokens(rule, draftWords) {
		ruleWords[w] = true
	}
	for i, asked := range ev.Asked {
		t := text.OneLine(safetext.StripControls(text.ClipRunes(asked, maxCommentRunes)))
		spec, _, ok := instruction(t)
		if !ok {
			continue
		}
		novel := 0
		for _, w := range english.Tokens(spec, draftWords) {
			if len(w) > 3 && !ruleWords[w] {
				novel++
			}
		}
		if novel >= 2 && safetext.Secret(spec) == "" && (accept == nil || accept(spec)) {
			id := ""
			if i < len(ev.AskedBy) {
				id = ev.AskedBy[i]
			}
			return spec, id, true
		}
	}
	return "", "", false
}

// lessonType is a protected category's constraint, else a guideline.
func lessonType(ev rulefmt.Evidence) rulefmt.Type {
	if ev.Protected {
		return rulefmt.Constraint
	}
	return rulefmt.Guideline
}

// supportText is the support a lesson draft ends with.
func supportText(ev rulefmt.Evidence) string {
	reviewers, epics := len(rulefmt.Distinct(ev.Reviewers)), len(rulefmt.Distinct(ev.Epics))
	return fmt.Sprintf(" — flagged %d %s by %d %s in %d %s.", ev.Support(), text.Plural(ev.Support(), "time", "times"),
		reviewers, text.Plural(reviewers, "reviewer", "reviewers"), epics, text.Plural(epics, "epic", "epics"))
}

// directiveVerbs start a sentence that already reads as an instruction.
var directiveVerbs = map[string]rulefmt.Type{
	"always": rulefmt.Constraint, "never": rulefmt.Constraint, "don't": rulefmt.Constraint, "dont": rulefmt.Constraint, "must": rulefmt.Constraint,
	"add": rulefmt.Guideline, "avoid": rulefmt.Guideline, "use": rulefmt.Guideline, "remove": rulefmt.Guideline, "include": rulefmt.Guideline,
	"write": rulefmt.Guideline, "keep": rulefmt.Guideline, "make": rulefmt.Guideline, "ensure": rulefmt.Guideline, "prefer": rulefmt.Guideline,
	"handle": rulefmt.Guideline, "check": rulefmt.Guideline, "validate": rulefmt.Guideline, "wrap": rulefmt.Guideline, "return": rulefmt.Guideline,
	"log": rulefmt.Guideline, "document": rulefmt.Guideline, "split": rulefmt.Guideline, "rename": rulefmt.Guideline, "follow": rulefmt.Guideline,
	"cover": rulefmt.Guideline, "run": rulefmt.Guideline, "update": rulefmt.Guideline, "delete": rulefmt.Guideline, "drop": rulefmt.Guideline,
	"stop": rulefmt.Guideline, "put": rulefmt.Guideline, "move": rulefmt.Guideline, "extract": rulefmt.Guideline, "reuse": rulefmt.Guideline,
	"replace": rulefmt.Guideline, "limit": rulefmt.Guideline, "explain": rulefmt.Guideline, "describe": rulefmt.Guideline, "mention": rulefmt.Guideline,
	"cite": rulefmt.Guideline, "link": rulefmt.Guideline, "state": rulefmt.Guideline, "list": rulefmt.Guideline, "close": rulefmt.Guideline,
	"release": rulefmt.Guideline, "guard": rulefmt.Guideline, "escape": rulefmt.Guideline, "sanitize": rulefmt.Guideline, "verify": rulefmt.Guideline,
	"pin": rulefmt.Guideline, "specify": rulefmt.Guideline, "clarify": rulefmt.Guideline, "reference": rulefmt.Guideline, "test": rulefmt.Guideline,
	"consider": rulefmt.Guideline, "compare": rulefmt.Guideline, "justify": rulefmt.Guideline, "break": rulefmt.Guideline, "name": rulefmt.Guideline, "annotate": rulefmt.Guideline, "mock": rulefmt.Guideline,
}

// leadIns are filler a reviewer puts before the point.
var leadIns = []string{
	"nit:", "nit", "nitpick:", "please", "pls", "plz", "again", "also", "so", "ok", "okay", "hmm", "fyi", "imo",
	"i think", "i'd say", "we should", "you should", "the agent should", "agent should", "it should",
	"can you", "could you", "you need to", "we need to", "need to", "needs to", "you must", "make sure to",
	"remember to", "as always", "once more", "still", "sigh",
}

var (
	missingLead  = regexp.MustCompile(`(?i)^(?:missing|no|lacks?|lacking|without)\s+(.+)$`)
	missingTail  = regexp.MustCompile(`(?i)^(.+?)\s+(?:is|are)\s+(?:missing|absent|lacking|not there)\b\s*(.*)$`)
	modalPattern = regexp.MustCompile(`(?i)^(.+?)\s+(should|must|needs to|need to)\s+(.+)$`)
	tooPattern   = regexp.MustCompile(`(?i)^too\s+(?:many|much|long|verbose|big|large|complex)\b`)
	badState     = regexp.MustCompile(`(?i)^(.+?)\s+(is|are)\s+((?:too\s+)?(?:wrong|incorrect|broken|outdated|inconsistent|unclear|confusing|hard to read|long|vague|flaky|redundant|unnecessary|hardcoded|hard-coded|verbose|duplicated|missing tests|untested|swallowed|ignored|leaking))\b\s*(.*)$`)
)

// instruction rewrites one comment as an imperative instruction, if it can.
func instruction(comment string) (string, rulefmt.Type, bool) {
	out, typ, _, ok := instructionWithReason(comment)
	return out, typ, ok
}

// instructionWithReason rewrites one comment as an imperative
// instruction: a prescription the reviewer wrote anywhere in the comment
// ("…; always set a timeout") wins over one inferred from a problem
// statement ("missing tests" → "Include tests"). When the instruction
// comes from a later sentence, the comment's first sentence (usually the
// problem) is returned as the reason.
func instructionWithReason(comment string) (string, rulefmt.Type, string, bool) {
	var cands []string
	for _, cand := range rulefmt.Sentences(comment) {
		c := balance(text.ClipWords(stripLeadIns(trimSentence(cand)), maxInstructionRunes))
		if contentWords(c) >= 2 {
			cands = append(cands, c)
		}
	}
	// A prescription the reviewer wrote ("never …", "X should …") wins
	// over a sentence that merely starts with a verb, which wins over one
	// inferred from a problem: the problem sentence is never the rule.
	for _, try := range []func(string) (string, rulefmt.Type, bool){prescribedInstruction, imperativeInstruction, inferredInstruction} {
		for i, c := range cands {
			if out, typ, ok := try(c); ok {
				reason := ""
				if i > 0 {
					reason = cands[0]
				}
				return out, typ, reason, true
			}
		}
	}
	return "", "", "", false
}

// prescribedInstruction accepts a sentence that prescribes in so many
// words: "always …", "never …", "don't …", "do not …", "X should …".
func prescribedInstruction(s string) (string, rulefmt.Type, bool) {
	first := strings.ToLower(strings.Trim(strings.Fields(s)[0], ",:"))
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "do not "):
		return text.UpperFirst(s) + ".", rulefmt.Constraint, true
	case strings.HasPrefix(lower, "no need"):
		return "", "", false
	}
	if t := directiveVerbs[first]; t == rulefmt.Constraint {
		return text.UpperFirst(s) + ".", t, true
	}
	if m := modalPattern.FindStringSubmatch(s); m != nil && contentWords(m[1]) >= 1 && prescribes(s) {
		t := rulefmt.Guideline
		if strings.EqualFold(m[2], "must") {
			t = rulefmt.Constraint
		}
		return text.UpperFirst(s) + ".", t, true
	}
	return "", "", false
}

// imperativeInstruction accepts a sentence starting with an imperative
// verb ("add …", "wrap …"), unless the verb is a noun followed by a
// statement ("log lines include …", "release push fails …").
func imperativeInstruction(s string) (string, rulefmt.Type, bool) {
	first := strings.ToLower(strings.Trim(strings.Fields(s)[0], ",:"))
	if t, ok := directiveVerbs[first]; ok && prescribes(s) {
		return text.UpperFirst(s) + ".", t, true
	}
	return "", "", false
}

// inferredInstruction turns a problem statement into an instruction:
// what is missing should be included, excess avoided, a bad state not
// reached.
func inferredInstruction(s string) (string, rulefmt.Type, bool) {
	if m := missingLead.FindStringSubmatch(s); m != nil && contentWords(m[1]) >= 1 {
		return "Include " + lowerFirst(stripLeadIns(m[1])) + ".", rulefmt.Guideline, true
	}
	if m := missingTail.FindStringSubmatch(s); m != nil {
		rest := strings.TrimSpace(m[1] + " " + m[2])
		return "Include " + lowerFirst(rest) + ".", rulefmt.Guideline, true
	}
	if tooPattern.MatchString(s) {
		return "Avoid " + lowerFirst(s) + ".", rulefmt.Guideline, true
	}
	if m := badState.FindStringSubmatch(s); m != nil {
		rest := strings.TrimSpace(m[4])
		out := "Make sure " + lowerFirst(m[1]) + " " + strings.ToLower(m[2]) + " not " + strings.ToLower(m[3])
		switch {
		case rest == "":
		case strings.ContainsRune(",:;", rune(rest[0])):
			out += rest
		default:
			out += " " + rest
		}
		return out + ".", rulefmt.Guideline, true
	}
	return "", "", false
}

// balance drops an opening bracket or quote that a clipped sentence left
// unclosed, with what follows it when enough remains, so a rule never
// reads "… a name (maxUploadBytes.".
func balance(s string) string {
	for _, pair := range [][2]string{{"(", ")"}, {"[", "]"}, {"'", "'"}, {"\"", "\""}, {"`", "`"}} {
		open, close := pair[0], pair[1]
		var unbalanced bool
		if open == close {
			unbalanced = len(quotes(s, open[0]))%2 == 1
		} else {
			unbalanced = strings.Count(s, open) > strings.Count(s, close)
		}
		if !unbalanced {
			continue
		}
		i := strings.LastIndex(s, open)
		if q := quotes(s, open[0]); open == close {
			i = q[len(q)-1]
		}
		if head := strings.TrimRight(s[:i], " ,:;-"); contentWords(head) >= 3 {
			s = head
		} else {
			s = s[:i] + s[i+len(open):]
		}
	}
	return strings.TrimSpace(s)
}

// quotes returns the positions of quote character q in s, leaving out
// apostrophes (a quote between two letters, as in "don't").
func quotes(s string, q byte) []int {
	var out []int
	for i := 0; i < len(s); i++ {
		if s[i] != q {
			continue
		}
		if q == '\'' && i > 0 && i+1 < len(s) && isLetterByte(s[i-1]) && isLetterByte(s[i+1]) {
			continue
		}
		out = append(out, i)
	}
	return out
}

func isLetterByte(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// trimSentence drops surrounding punctuation, quotes and repeated marks.
func trimSentence(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(".,;:!?-–—\"'`“”‘’()[]*_>#", r)
	})
}

// stripLeadIns removes filler words before and after the point.
func stripLeadIns(s string) string {
	for changed := true; changed; {
		changed = false
		for _, l := range leadIns {
			if len(s) >= len(l) && strings.EqualFold(s[:len(l)], l) && (len(s) == len(l) || !isWordRune(rune(s[len(l)]))) {
				s = trimSentence(s[len(l):])
				changed = true
				break
			}
		}
	}
	for _, tail := range []string{" again", " please", " pls", " thanks", " as usual", " once more"} {
		if len(s) >= len(tail) && strings.EqualFold(s[len(s)-len(tail):], tail) {
			s = trimSentence(s[:len(s)-len(tail)])
		}
	}
	return s
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' }

// lowerFirst lower-cases the first letter unless the first word looks
// like a name or an acronym (a second capital letter).
func lowerFirst(s string) string {
	word, _, _ := strings.Cut(s, " ")
	upper := 0
	for _, r := range word {
		if unicode.IsUpper(r) {
			upper++
		}
	}
	if upper > 1 {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}

// evidenceSummary says what supports a drafted rule: counts, distinct
// reviewers and epics, and representative comments quoted.
func evidenceSummary(ev rulefmt.Evidence) string {
	reviewers, epics := rulefmt.Distinct(ev.Reviewers), rulefmt.Distinct(ev.Epics)
	var b strings.Builder
	fmt.Fprintf(&b, "%d negative %s from %d distinct %s (%s) across %d distinct %s (%s) for %s; cluster %s classified %s (confidence %.2f).",
		ev.Size, text.Plural(ev.Size, "review", "reviews"),
		len(reviewers), text.Plural(len(reviewers), "reviewer", "reviewers"), listSome(reviewers, 5),
		len(epics), text.Plural(len(epics), "epic", "epics"), listSome(epics, 5),
		strings.Join(ev.Agents, ", "), ev.ClusterID, ev.Class, ev.Confidence)
	if producers := rulefmt.Distinct(ev.Producers); len(producers) > 0 {
		fmt.Fprintf(&b, " Recorded by %d %s: %s.", len(producers), text.Plural(len(producers), "producer", "producers"), listSome(producers, 5))
	}
	var quotes []string
	for _, c := range ev.Comments {
		// The summary is committed and posted: secrets are redacted before
		// the quote is clipped, so a clipped secret cannot slip through.
		t := text.OneLine(safetext.Redact(safetext.StripControls(c.Text)))
		if t == "" {
			continue
		}
		q := "“" + text.ClipWords(t, 160) + "”"
		if c.ReviewerID != "" {
			q += " — " + c.ReviewerID
		}
		quotes = append(quotes, q)
		if len(quotes) == 3 {
			break
		}
	}
	if len(quotes) > 0 {
		b.WriteString(" Representative comments: " + strings.Join(quotes, "; ") + ".")
	}
	return b.String()
}

// listSome lists at most n items, and how many more there are.
func listSome(items []string, n int) string {
	if len(items) == 0 {
		return "none recorded"
	}
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}
