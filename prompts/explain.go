package prompts

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Explanation says what goes into one prompt and why.
type Explanation struct {
	// Version is the version BuildPrompt returns for the same request, ""
	// when it would fail (see Problem).
	Version string
	Commit  string
	// BasePromptRef is prompts/<stage>.md or RequestRef.
	BasePromptRef string
	// Problem is why BuildPrompt fails for this request, or "".
	Problem string
	// RulesFiles lists the _rules.md places on the path (outermost first,
	// existing or not), then existing _rules.md files off the path.
	RulesFiles []RulesFile
	// Rules lists the agent's rules in prompt order, then the rest of its
	// rules, then other agents' rules.
	Rules []RuleExplanation
	// Summary says it in one sentence.
	Summary string
}

// RulesFile says whether one _rules.md applies.
type RulesFile struct {
	Path    string
	Exists  bool
	Applies bool
	Reason  string
}

// RuleExplanation says whether one rule is in the prompt and why.
type RuleExplanation struct {
	rulefmt.Rule
	// Agents are the agents whose directory holds the rule.
	Agents   []string
	Included bool
	// Position is the rule's place among the learned rules (from 1), 0
	// when it is not in the prompt.
	Position int
	// Reason is why it is left out; "" when included.
	Reason Reason
	// Detail says why in words.
	Detail string
}

// explain says what goes into the prompt for req (built as p, or failing
// with buildErr) and why: the base prompt, each _rules.md file, each rule,
// and a one-sentence summary.
func (ix *index) explain(req Request, dir string, maxRules int, p *Prompt, buildErr error) *Explanation {
	e := &Explanation{Commit: commitString(ix), BasePromptRef: stagePath(req.Stage)}
	if req.BasePrompt != nil {
		e.BasePromptRef = RequestRef
	}
	if buildErr != nil {
		e.Problem = precept.ErrorMessage(buildErr)
	} else {
		e.Version = p.Version
	}
	where := "the repository root"
	if dir != "" {
		where = dir + "/"
	}
	applied := e.explainRulesFiles(ix, dir, where)
	mine := e.explainAgentRules(ix, req.Agent, maxRules)
	e.explainOtherAgentsRules(ix, req.Agent, mine)
	e.summarize(req, where, applied)
	return e
}

// explainRulesFiles lists the _rules.md places on the path to the scope
// (outermost first) and whether each applies, then the existing files off
// the path. It returns how many apply.
func (e *Explanation) explainRulesFiles(ix *index, dir, where string) (applied int) {
	onPath := map[string]bool{}
	for _, d := range rulesFileDirs(dir) {
		onPath[d] = true
		f := RulesFile{Path: rulesFilePath(d)}
		switch doc := ix.dirs[d]; {
		case doc == nil:
			f.Reason = "no _rules.md here (optional)"
		case doc.problem != "":
			f.Exists, f.Reason = true, "not used: "+doc.problem
		case doc.text == "":
			f.Exists, f.Reason = true, "empty: nothing to add"
		default:
			f.Exists, f.Applies = true, true
			f.Reason = "applies: on the path to " + where
			applied++
		}
		e.RulesFiles = append(e.RulesFiles, f)
	}
	for _, d := range slices.Sorted(maps.Keys(ix.dirs)) {
		if !onPath[d] {
			e.RulesFiles = append(e.RulesFiles, RulesFile{Path: rulesFilePath(d), Exists: true,
				Reason: fmt.Sprintf("not on the path: applies to %s/ and below, the scope is %s", strings.TrimSuffix(promptsDir+"/"+d, "/"), where)})
		}
	}
	return applied
}

// explainAgentRules explains the agent's own rules: active ones in prompt
// order (included up to maxRules, then over budget), shadow ones, then
// the unusable and inactive. It returns their ids.
func (e *Explanation) explainAgentRules(ix *index, agent string, maxRules int) (mine map[string]bool) {
	mine = map[string]bool{}
	add := func(r *rule, x RuleExplanation) {
		x.Rule, x.Agents = r.Rule, []string{agent}
		mine[r.ID] = true
		e.Rules = append(e.Rules, x)
	}
	ar := ix.agents[agent]
	if ar == nil {
		return mine
	}
	for i, r := range ar.active {
		if i < maxRules {
			add(r, RuleExplanation{Included: true, Position: i + 1,
				Detail: fmt.Sprintf("included at position %d: importance %s, confidence %.2f", i+1, r.Importance, r.Confidence)})
			continue
		}
		add(r, RuleExplanation{Reason: ReasonBudget, Detail: budgetDetail(i+1, len(ar.active), maxRules)})
	}
	_, inShadow := shadowRules(ar, maxRules)
	for _, r := range ar.shadow {
		add(r, RuleExplanation{Reason: ReasonShadow, Detail: shadowDetail(r, inShadow[r.ID], maxRules)})
	}
	for _, r := range ar.other {
		if r.unsafe {
			add(r, RuleExplanation{Reason: ReasonUnsafe, Detail: unsafeDetail(r)})
			continue
		}
		if r.problem != "" {
			add(r, RuleExplanation{Reason: ReasonInvalid, Detail: r.path + " cannot be used: " + r.problem})
			continue
		}
		add(r, RuleExplanation{Reason: ReasonInactive, Detail: fmt.Sprintf("status %s: only ACTIVE rules enter the prompt (SHADOW ones the shadow prompt)", r.Status)})
	}
	return mine
}

// explainOtherAgentsRules lists the rules the agent does not hold, once
// per id with every agent that holds them, in id order.
func (e *Explanation) explainOtherAgentsRules(ix *index, agent string, mine map[string]bool) {
	others := map[string]*RuleExplanation{}
	for _, other := range slices.Sorted(maps.Keys(ix.agents)) {
		if other == agent {
			continue
		}
		ar := ix.agents[other]
		for _, r := range slices.Concat(ar.active, ar.shadow, ar.other) {
			if mine[r.ID] {
				continue
			}
			if x := others[r.ID]; x != nil {
				x.Agents = append(x.Agents, other)
				continue
			}
			others[r.ID] = &RuleExplanation{Rule: r.Rule, Agents: []string{other}, Reason: ReasonOtherAgent}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(others)) {
		x := others[id]
		x.Detail = fmt.Sprintf("belongs to %s, not %s: a rule applies to the agents whose directory under %s holds it", strings.Join(x.Agents, ", "), agent, rulefmt.ActiveDir)
		e.Rules = append(e.Rules, *x)
	}
}

// summarize says in one sentence what the prompt is made of and what is
// left out, and why BuildPrompt fails when it does.
func (e *Explanation) summarize(req Request, where string, applied int) {
	included := 0
	count := map[Reason]int{}
	for _, r := range e.Rules {
		if r.Included {
			included++
		} else {
			count[r.Reason]++
		}
	}
	var out []string
	for _, r := range []Reason{ReasonBudget, ReasonShadow, ReasonInactive, ReasonInvalid, ReasonUnsafe, ReasonOtherAgent} {
		if count[r] > 0 {
			out = append(out, fmt.Sprintf("%d %s", count[r], r))
		}
	}
	left := "none left out"
	if len(out) > 0 {
		left = "left out: " + strings.Join(out, ", ")
	}
	e.Summary = fmt.Sprintf("agent %s, stage %s, scope %s: base prompt %s, %d _rules.md %s, %d learned %s; %s.",
		req.Agent, req.Stage, where, e.BasePromptRef, applied, text.Plural(applied, "file", "files"), included, text.Plural(included, "rule", "rules"), left)
	if e.Problem != "" {
		e.Summary += " BuildPrompt fails: " + e.Problem
	}
}
