package prompts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// SourceKind says what kind of input went into a prompt.
type SourceKind string

// The kinds of prompt sources.
const (
	SourceBasePrompt SourceKind = "base_prompt"
	SourceRulesFile  SourceKind = "rules_md"
	SourceRule       SourceKind = "rule"
)

// RequestRef is the Ref of a base prompt sent with the request.
const RequestRef = "request"

// Source is one input of an assembled prompt.
type Source struct {
	Kind SourceKind
	// Ref is the repository path of a file, RequestRef, or the rule id.
	Ref string
	// Digest is the git blob hash of a file or rule, or "sha256:<hex>" of
	// a base prompt sent with the request.
	Digest string
}

// Reason says why a rule is not in a prompt.
type Reason string

// The reasons a rule is left out. BuildPrompt reports ReasonBudget,
// ReasonShadow and ReasonUnsafe; Explain reports all of them.
const (
	// ReasonBudget: the rule ranked below the max_rules best.
	ReasonBudget Reason = "budget"
	// ReasonShadow: the rule is in its shadow period: only in the shadow
	// prompt.
	ReasonShadow Reason = "shadow"
	// ReasonOtherAgent: the rule is in another agent's directory.
	ReasonOtherAgent Reason = "other_agent"
	// ReasonInactive: the rule's status is neither ACTIVE nor SHADOW.
	ReasonInactive Reason = "inactive"
	// ReasonInvalid: the rule file cannot be read as a rule.
	ReasonInvalid Reason = "invalid"
	// ReasonUnsafe: the rule's text fails the checks every prompt text
	// passes (a control character, a secret, a denylisted phrase): it
	// reached the repository past the quality gate.
	ReasonUnsafe Reason = "unsafe"
)

// Excluded is a rule left out of a prompt.
type Excluded struct {
	RuleID string
	Reason Reason
	// Detail says more in words, e.g. the rule's rank.
	Detail string
}

// Prompt is an assembled prompt. Prompts are shared between callers
// through the cache: treat every field as read-only.
type Prompt struct {
	// Text is the prompt the agent runs with.
	Text string
	// Version is a hash of Text: the same text gives the same version.
	Version string
	// Commit is the rules-repository commit the prompt comes from, "" when
	// main does not exist yet.
	Commit string
	// Sources are the inputs in the order they appear in Text.
	Sources []Source
	// Excluded lists the agent's rules that are not in Text.
	Excluded []Excluded
	// RuleIDs are the learned rules in Text, in order.
	RuleIDs []string
	// ShadowText is Text with the agent's shadow rules ranked in, for A/B
	// runs; "" when the agent has no shadow rules.
	ShadowText    string
	ShadowVersion string
	// ShadowRuleIDs are the shadow rules in ShadowText.
	ShadowRuleIDs []string
	// ShadowTextRuleIDs are all the learned rules in ShadowText, in order.
	ShadowTextRuleIDs []string
}

// formatVersion changes whenever the rendering below changes, so a new
// layout never shares a version with an old one.
const formatVersion = "precept-prompt/1\n"

// version hashes exactly the text an agent receives.
func version(text string) string {
	h := sha256.New()
	h.Write([]byte(formatVersion))
	h.Write([]byte(text))
	return "v1:" + hex.EncodeToString(h.Sum(nil)[:8])
}

// shadowVersion hashes a shadow prompt's text apart from the same text
// served as the main prompt: once the shadow rules become active, the main
// prompt has the shadow prompt's text, and decisions made with either must
// still be told apart (docs/effects.md).
func shadowVersion(text string) string { return version("shadow\n" + text) }

// LearnedRulesHeading opens the section of learned rules (docs/formats.md, "Assembled prompts").
const LearnedRulesHeading = "## Learned Rules (from feedback)"

// assemble builds the prompt for a validated request whose scope directory
// is dir.
func (ix *index) assemble(req Request, dir string, maxRules int) (*Prompt, error) {
	p := &Prompt{Commit: commitString(ix)}
	base, err := ix.base(req)
	if err != nil {
		return nil, err
	}
	p.Sources = append(p.Sources, base.source)

	var files []*document
	for _, d := range rulesFileDirs(dir) {
		if f := ix.dirs[d]; f != nil && f.problem == "" && f.text != "" {
			files = append(files, f)
			p.Sources = append(p.Sources, Source{Kind: SourceRulesFile, Ref: f.path, Digest: f.blob.String()})
		}
	}

	ar := ix.agents[req.Agent]
	if ar == nil {
		ar = &agentRules{}
	}
	in := ar.active[:min(len(ar.active), maxRules)]
	for _, r := range in {
		p.RuleIDs = append(p.RuleIDs, r.ID)
		p.Sources = append(p.Sources, Source{Kind: SourceRule, Ref: r.ID, Digest: r.blob.String()})
	}
	for i, r := range ar.active[len(in):] {
		p.Excluded = append(p.Excluded, Excluded{RuleID: r.ID, Reason: ReasonBudget, Detail: budgetDetail(len(in)+i+1, len(ar.active), maxRules)})
	}
	for _, r := range ar.other {
		if r.unsafe && (r.Status == rulefmt.Active || r.Status == rulefmt.Shadow) {
			p.Excluded = append(p.Excluded, Excluded{RuleID: r.ID, Reason: ReasonUnsafe, Detail: unsafeDetail(r)})
		}
	}
	p.Text = render(base.text, files, in)
	p.Version = version(p.Text)

	if len(ar.shadow) == 0 {
		return p, nil
	}
	merged, inShadow := shadowRules(ar, maxRules)
	for _, r := range merged {
		p.ShadowTextRuleIDs = append(p.ShadowTextRuleIDs, r.ID)
		if inShadow[r.ID] {
			p.ShadowRuleIDs = append(p.ShadowRuleIDs, r.ID)
		}
	}
	for _, r := range ar.shadow {
		p.Excluded = append(p.Excluded, Excluded{RuleID: r.ID, Reason: ReasonShadow, Detail: shadowDetail(r, inShadow[r.ID], maxRules)})
	}
	p.ShadowText = render(base.text, files, merged)
	p.ShadowVersion = shadowVersion(p.ShadowText)
	return p, nil
}

// shadowRules returns the learned rules of the shadow prompt, the prompt
// as it will be when the shadow rules become active: active and shadow
// rules ranked together within the budget. inShadow holds the ids of the
// shadow rules among them.
func shadowRules(ar *agentRules, maxRules int) (ranked []*rule, inShadow map[string]bool) {
	ranked = slices.SortedFunc(slices.Values(slices.Concat(ar.active, ar.shadow)), byRank)
	ranked = ranked[:min(len(ranked), maxRules)]
	inShadow = map[string]bool{}
	for _, r := range ranked {
		if r.Status == rulefmt.Shadow {
			inShadow[r.ID] = true
		}
	}
	return ranked, inShadow
}

type basePrompt struct {
	text   string
	source Source
}

// base returns the request's base prompt, else prompts/<stage>.md. A
// missing stage prompt is an error, not an empty base: an agent with a
// mistyped stage would otherwise run with no instructions at all.
func (ix *index) base(req Request) (basePrompt, error) {
	if req.BasePrompt != nil {
		sum := sha256.Sum256([]byte(*req.BasePrompt))
		return basePrompt{
			text:   normalizeText(*req.BasePrompt),
			source: Source{Kind: SourceBasePrompt, Ref: RequestRef, Digest: "sha256:" + hex.EncodeToString(sum[:])},
		}, nil
	}
	d := ix.stages[req.Stage]
	switch {
	case d == nil:
		return basePrompt{}, precept.Errorf(precept.FailedPrecondition,
			"no base prompt for stage %q: %s does not exist on the rules repository's main branch; commit it or send base_prompt", req.Stage, stagePath(req.Stage))
	case d.problem != "":
		return basePrompt{}, precept.Errorf(precept.FailedPrecondition, "base prompt %s cannot be used: %s", d.path, d.problem)
	}
	return basePrompt{text: d.text, source: Source{Kind: SourceBasePrompt, Ref: d.path, Digest: d.blob.String()}}, nil
}

func commitString(ix *index) string {
	if ix.commit.IsZero() {
		return ""
	}
	return ix.commit.String()
}

func budgetDetail(rank, total, maxRules int) string {
	return fmt.Sprintf("ranked %d of %d active rules; a prompt holds at most %d (prompts.max_rules)", rank, total, maxRules)
}

func unsafeDetail(r *rule) string {
	return r.path + " is never served: " + r.problem
}

func shadowDetail(r *rule, inShadowPrompt bool, maxRules int) string {
	var b strings.Builder
	b.WriteString("in its shadow period")
	if r.ShadowUntil != nil {
		b.WriteString(" until ")
		b.WriteString(r.ShadowUntil.UTC().Format(time.RFC3339))
	}
	if inShadowPrompt {
		b.WriteString("; only in the shadow prompt")
	} else {
		fmt.Fprintf(&b, "; ranked below the %d rules the shadow prompt holds", maxRules)
	}
	return b.String()
}

// render lays out a prompt: the base, each _rules.md under a heading
// naming its path, then the learned rules, each tagged with its id.
func render(base string, files []*document, rs []*rule) string {
	n := len(base) + len(LearnedRulesHeading) + 8
	for _, f := range files {
		n += len(f.path) + len(f.text) + 32
	}
	for _, r := range rs {
		n += len(r.ID) + len(r.Content) + 16
	}
	var b strings.Builder
	b.Grow(n)
	section := func() {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
	}
	b.WriteString(base)
	for _, f := range files {
		section()
		b.WriteString("## Directory Rules (")
		b.WriteString(f.path)
		b.WriteString(")\n\n")
		b.WriteString(f.text)
	}
	if len(rs) > 0 {
		section()
		b.WriteString(LearnedRulesHeading)
		b.WriteString("\n")
		for _, r := range rs {
			b.WriteString("\n- [")
			b.WriteString(r.ID)
			b.WriteString("] ")
			// Later lines are indented under the bullet; blank lines stay
			// empty rather than carrying trailing spaces.
			for i, line := range strings.Split(r.Content, "\n") {
				if i > 0 {
					b.WriteString("\n")
					if line != "" {
						b.WriteString("  ")
					}
				}
				b.WriteString(line)
			}
		}
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}
