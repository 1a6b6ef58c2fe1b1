package rulefmt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Type says how a rule guides an agent (docs/formats.md, "Rule files").
type Type string

// The rule types.
const (
	NegativeExample Type = "NEGATIVE_EXAMPLE"
	PositiveExample Type = "POSITIVE_EXAMPLE"
	Guideline       Type = "GUIDELINE"
	Constraint      Type = "CONSTRAINT"
)

// Valid reports whether t is a known rule type.
func (t Type) Valid() bool {
	switch t {
	case NegativeExample, PositiveExample, Guideline, Constraint:
		return true
	}
	return false
}

// Status is where an approved rule is in its lifecycle (docs/lifecycle.md).
type Status string

// The rule statuses. Only Active rules enter an agent's prompt; Shadow
// rules enter its shadow prompt.
const (
	Shadow     Status = "SHADOW"
	Active     Status = "ACTIVE"
	RolledBack Status = "ROLLED_BACK"
	Sunset     Status = "SUNSET"
)

// Importance orders rules within a prompt (docs/formats.md, "Rule
// files"). Approval writes Normal; the learning loop raises it with
// validations (docs/effects.md).
type Importance string

// The importance levels, lowest first.
const (
	Normal    Importance = "NORMAL"
	Important Importance = "IMPORTANT"
	Critical  Importance = "CRITICAL"
)

// Rank orders importance levels: higher is more important.
func (i Importance) Rank() int {
	switch i {
	case Critical:
		return 3
	case Important:
		return 2
	case Normal, "":
		return 1
	}
	return 0
}

// DefaultInsertionPoint is where a rule goes when its proposal names none:
// the learned-rules section of the prompt.
const DefaultInsertionPoint = "learned_rules"

// Approval is one person's approval of a proposal.
type Approval struct {
	Approver string    `yaml:"approver"`
	Note     string    `yaml:"note,omitempty"`
	At       time.Time `yaml:"at"`
	// Via is api, slack or git.
	Via string `yaml:"via"`
	// TextSHA256 is the Proposal.TextSHA256 of what was approved; the
	// approval lapses when the text changes.
	TextSHA256 string `yaml:"text_sha256,omitempty"`
	// Commit recorded the approval; filled from history, not stored.
	Commit string `yaml:"-"`
}

// Rule is an approved rule as stored in the rules repository at
// rules/active/<agent>/<rule_id>.md: YAML front matter, then the rule text
// as the Markdown body. A rule for several agents has one identical file
// in each agent's directory.
type Rule struct {
	ID                  string     `yaml:"rule_id"`
	ProposalID          string     `yaml:"proposal_id"`
	Agents              []string   `yaml:"agents"`
	Type                Type       `yaml:"rule_type"`
	InsertionPoint      string     `yaml:"insertion_point"`
	Status              Status     `yaml:"status"`
	Importance          Importance `yaml:"importance"`
	Confidence          float64    `yaml:"confidence"`
	Frequency           int        `yaml:"frequency"`
	FeedbackIDs         []string   `yaml:"feedback_ids,omitempty"`
	ClusterID           string     `yaml:"cluster_id,omitempty"`
	Approvals           []Approval `yaml:"approvals,omitempty"`
	Tags                []string   `yaml:"tags,omitempty"`
	Protected           bool       `yaml:"protected,omitempty"`
	ActivatedAt         time.Time  `yaml:"activated_at"`
	ShadowUntil         *time.Time `yaml:"shadow_until,omitempty"`
	PositiveValidations int        `yaml:"positive_validations,omitempty"`
	NegativeValidations int        `yaml:"negative_validations,omitempty"`
	EvidenceSummary     string     `yaml:"evidence_summary,omitempty"`
	RollbackReason      string     `yaml:"rollback_reason,omitempty"`
	// ProposedBy is "precept" for drafted rules, else the manual proposer.
	ProposedBy string `yaml:"proposed_by,omitempty"`
	// Supersedes are the rules this one replaced when it was approved.
	Supersedes []string `yaml:"supersedes,omitempty"`
	// EvidenceClusters are clusters whose duplicate drafts added their
	// evidence to this rule after it was approved (Frequency counts them).
	EvidenceClusters []string `yaml:"evidence_clusters,omitempty"`
	// SunsetReason says why a SUNSET rule was retired (e.g. superseded).
	SunsetReason string `yaml:"sunset_reason,omitempty"`
	// ShadowReason says why an ACTIVE rule went back to SHADOW (an
	// unanswered re-approval); such a rule stays there until an ACTIVATE
	// proposal is approved.
	ShadowReason string `yaml:"shadow_reason,omitempty"`
	// ShadowedAt is when it went back to SHADOW, which ends its exposures.
	ShadowedAt *time.Time `yaml:"shadowed_at,omitempty"`
	// ReapprovedAt is when people last confirmed an idle rule.
	ReapprovedAt *time.Time `yaml:"reapproved_at,omitempty"`
	// Effect is the learning loop's last recorded figures
	// (docs/effects.md); written periodically, not per decision.
	Effect *EffectSummary `yaml:"effect,omitempty"`
	Extra  map[string]any `yaml:",inline"`
	// Content is the rule text: the Markdown body of the file.
	Content string `yaml:"-"`
}

// ParseRule reads a rule file.
func ParseRule(data []byte) (Rule, error) {
	var r Rule
	body, err := parseFrontMatter(data, &r)
	if err != nil {
		return Rule{}, fmt.Errorf("parse rule: %w", err)
	}
	r.Content = body
	if r.ID == "" {
		return Rule{}, errors.New("parse rule: rule_id is missing")
	}
	if strings.TrimSpace(r.Content) == "" {
		return Rule{}, fmt.Errorf("parse rule %s: the rule text is empty", r.ID)
	}
	if r.InsertionPoint == "" {
		r.InsertionPoint = DefaultInsertionPoint
	}
	if r.Importance == "" {
		r.Importance = Normal
	}
	if r.Status == "" {
		r.Status = Active
	}
	return r, nil
}

// Marshal renders a rule file.
func (r Rule) Marshal() ([]byte, error) {
	return renderFrontMatter(r, r.Content)
}

// Clone returns a deep copy of a rule.
func (r Rule) Clone() Rule {
	r.Agents = slices.Clone(r.Agents)
	r.FeedbackIDs = slices.Clone(r.FeedbackIDs)
	r.Approvals = slices.Clone(r.Approvals)
	r.Tags = slices.Clone(r.Tags)
	r.Supersedes = slices.Clone(r.Supersedes)
	r.EvidenceClusters = slices.Clone(r.EvidenceClusters)
	if r.ShadowUntil != nil {
		t := *r.ShadowUntil
		r.ShadowUntil = &t
	}
	if r.ReapprovedAt != nil {
		t := *r.ReapprovedAt
		r.ReapprovedAt = &t
	}
	if r.ShadowedAt != nil {
		t := *r.ShadowedAt
		r.ShadowedAt = &t
	}
	if r.Effect != nil {
		e := *r.Effect
		e.RateAfterInterval, e.ChangeInterval = slices.Clone(e.RateAfterInterval), slices.Clone(e.ChangeInterval)
		r.Effect = &e
	}
	return r
}

const fence = "---\n"

// parseFrontMatter decodes the YAML between the leading "---" fences into
// v and returns the body after them, trimmed of surrounding blank lines.
func parseFrontMatter(data []byte, v any) (string, error) {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(s, fence) {
		return "", errors.New("no front matter: the file must start with ---")
	}
	rest := s[len(fence):]
	end := strings.Index(rest, "\n"+fence)
	var head, body string
	switch {
	case strings.HasPrefix(rest, fence):
		head, body = "", rest[len(fence):]
	case end >= 0:
		head, body = rest[:end+1], rest[end+1+len(fence):]
	case strings.HasSuffix(rest, "\n---"):
		head, body = rest[:len(rest)-3], ""
	default:
		return "", errors.New("front matter is not closed with ---")
	}
	dec := yaml.NewDecoder(strings.NewReader(head))
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("front matter: %w", err)
	}
	return strings.Trim(body, "\n"), nil
}

// renderFrontMatter writes v as YAML front matter followed by body.
func renderFrontMatter(v any, body string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(fence)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("render front matter: %w", err)
	}
	enc.Close()
	buf.WriteString(fence)
	buf.WriteString("\n")
	buf.WriteString(strings.Trim(body, "\n"))
	buf.WriteString("\n")
	return buf.Bytes(), nil
}

// TuningExample renders an approve/reject note as a tuning example:
// front matter, the note, and the rule text it judged.
func TuningExample(p Proposal, agent, label, curator, note, via string, at time.Time) ([]byte, error) {
	meta := struct {
		ProposalID  string    `yaml:"proposal_id"`
		RuleID      string    `yaml:"rule_id"`
		Agent       string    `yaml:"agent"`
		Label       string    `yaml:"label"`
		Curator     string    `yaml:"curator"`
		Via         string    `yaml:"via"`
		At          time.Time `yaml:"at"`
		GroundTruth bool      `yaml:"ground_truth"`
		FeedbackIDs []string  `yaml:"feedback_ids,omitempty"`
	}{p.ID, p.RuleID, agent, label, curator, via, at, strings.TrimSpace(note) != "", p.FeedbackIDs}
	if strings.TrimSpace(note) == "" {
		note = "(no note)"
	}
	body := "## Note\n\n" + strings.TrimSpace(note) + "\n\n## Rule\n\n" + strings.TrimSpace(p.Content)
	return renderFrontMatter(meta, body)
}

// Live reports whether the rule is in a prompt: ACTIVE, or SHADOW in the
// shadow prompt.
func (r *Rule) Live() bool { return r.Status == Active || r.Status == Shadow }
