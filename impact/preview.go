package impact

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept/lib/text"
)

// Preview is what a proposal would do (docs/lifecycle.md, "Impact
// preview").
type Preview struct {
	// Pending: not computed yet; everything else is empty.
	Pending bool `json:"pending,omitempty"`
	// ProposalID and ContentRevision name the proposal text previewed.
	ProposalID      string `json:"proposal_id"`
	ContentRevision int    `json:"content_revision"`
	// Category is the lesson category the rule addresses, "" when unknown.
	Category string `json:"category,omitempty"`
	// Cluster counts the negative decisions in the proposal's clusters;
	// CategoryNegatives the clear negative decisions of its agents whose
	// lesson is in Category.
	Cluster           Counts `json:"cluster"`
	CategoryNegatives Counts `json:"category_negatives"`
	// Added are the clauses of the rule text that no comment of its
	// evidence decisions asks for (docs/lessons.md, "Rules no wider than
	// the evidence"): guidance added beyond what reviewers said, by the
	// drafter, a model or an edit.
	Added []string `json:"added,omitempty"`
	// ApprovalsInScope counts the approved decisions in Scope;
	// OverCorrect those of them whose comment classifies into Category.
	ApprovalsInScope int    `json:"approvals_in_scope"`
	OverCorrect      Counts `json:"over_correct"`
	Scope            Scope  `json:"scope"`
	// Similar is the guidance on main close to the rule, most similar
	// first; MainCommit the commit it was read at.
	Similar    []Similar `json:"similar,omitempty"`
	MainCommit string    `json:"main_commit,omitempty"`
	// SimilarLeftOut counts the passages on main not compared: past the
	// cap of maxPassages, base prompts go first, then _rules.md files.
	SimilarLeftOut int    `json:"similar_left_out,omitempty"`
	Replay         Replay `json:"replay"`
	// Unevaluated counts the negative decisions of the proposal's agents
	// the evaluator had not evaluated when they were counted: a preview
	// with any is counted again once older than Refresh, even when
	// nothing else moved.
	Unevaluated int `json:"unevaluated,omitempty"`
	// FeedbackSeq is the feedback store's position the counts were
	// computed at.
	FeedbackSeq uint64    `json:"feedback_seq"`
	ComputedAt  time.Time `json:"computed_at"`
}

// Counts counts decisions in total, per agent and per epic. ByEpic
// lists at most maxEpics epics, those with the most decisions; Epics is
// how many epics there are and OtherEpics how many decisions the epics
// left out hold, so a preview stays small however many epics a busy
// agent works in.
type Counts struct {
	Total      int            `json:"total"`
	ByAgent    map[string]int `json:"by_agent,omitempty"`
	ByEpic     map[string]int `json:"by_epic,omitempty"`
	Epics      int            `json:"epics,omitempty"`
	OtherEpics int            `json:"other_epics,omitempty"`
}

// maxEpics bounds the epics a count lists (docs/thresholds.md, "Impact
// preview").
const maxEpics = 20

// capEpics keeps the maxEpics epics with the most decisions (the first
// by id among equals) and counts the rest in OtherEpics.
func (c *Counts) capEpics() {
	c.Epics = len(c.ByEpic)
	if len(c.ByEpic) <= maxEpics {
		return
	}
	epics := slices.SortedFunc(maps.Keys(c.ByEpic), func(a, b string) int {
		if d := c.ByEpic[b] - c.ByEpic[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, e := range epics[maxEpics:] {
		c.OtherEpics += c.ByEpic[e]
		delete(c.ByEpic, e)
	}
}

// epics is how many epics the count spans; previews kept before Epics
// existed have only ByEpic.
func (c Counts) epics() int {
	return max(c.Epics, len(c.ByEpic))
}

// clone is c sharing no map with it.
func (c Counts) clone() Counts {
	c.ByAgent, c.ByEpic = maps.Clone(c.ByAgent), maps.Clone(c.ByEpic)
	return c
}

func (c *Counts) add(agent, epic string) {
	if c.ByAgent == nil {
		c.ByAgent, c.ByEpic = map[string]int{}, map[string]int{}
	}
	c.Total++
	c.ByAgent[agent]++
	c.ByEpic[epic]++
}

// Scope is where an approved decision must have been made to be one the
// rule could over-correct: one of Agents, at one of Gates (any when
// empty), with a scope path under one of PathPrefixes (any when empty).
type Scope struct {
	Agents       []string `json:"agents"`
	Gates        []string `json:"gates,omitempty"`
	PathPrefixes []string `json:"path_prefixes,omitempty"`
}

// The kinds of Similar, as prompts names them.
const (
	KindRule       = "rule"
	KindRulesFile  = "rules_file"
	KindBasePrompt = "base_prompt"
)

// Similar is guidance on main close to the rule.
type Similar struct {
	Kind       string  `json:"kind"`
	Path       string  `json:"path"`
	RuleID     string  `json:"rule_id,omitempty"`
	Similarity float64 `json:"similarity"`
	// Opposing: the passage gives the opposite instruction.
	Opposing bool   `json:"opposing,omitempty"`
	Excerpt  string `json:"excerpt"`
}

// ReplayState says whether the LLM replay ran.
type ReplayState string

// The replay states.
const (
	ReplayOff     ReplayState = "off"
	ReplayPending ReplayState = "pending"
	ReplayDone    ReplayState = "done"
)

// Replay is the rule used as a checker by an LLM. Evidence outputs it
// flags are true positives, sampled approved outputs it flags false
// positives; answers that are malformed, time out or fail count apart
// and are never verdicts.
type Replay struct {
	State            ReplayState `json:"state"`
	Model            string      `json:"model,omitempty"`
	EvidenceJudged   int         `json:"evidence_judged"`
	EvidenceFlagged  int         `json:"evidence_flagged"`
	ApprovalsJudged  int         `json:"approvals_judged"`
	ApprovalsFlagged int         `json:"approvals_flagged"`
	Calls            int         `json:"calls"`
	Malformed        int         `json:"malformed"`
	Timeouts         int         `json:"timeouts"`
	Errors           int         `json:"errors"`
	UnsafeSkipped    int         `json:"unsafe_skipped"`
	// Capped: the call cap left outputs unjudged.
	Capped bool `json:"capped,omitempty"`
	// Attempts counts the replays run for this text. One in which most
	// calls failed or timed out (the LLM down) is not a result: the
	// replay stays pending and is run again at RetryAt, at most
	// maxReplayAttempts times. RetryAt is also when a replay the call
	// budget held back may run.
	Attempts int       `json:"attempts,omitempty"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
}

// failed reports whether most of the replay's calls failed or timed
// out, so its figures say more about the LLM than about the rule.
func (r Replay) failed() bool {
	return r.Calls > 0 && 2*(r.Errors+r.Timeouts) > r.Calls
}

// Precision is the share of flagged outputs that were evidence, over n
// flagged outputs; n = 0 means no figure.
func (r Replay) Precision() (p float64, n int) {
	n = r.EvidenceFlagged + r.ApprovalsFlagged
	if n == 0 {
		return 0, 0
	}
	return float64(r.EvidenceFlagged) / float64(n), n
}

// Recall is the share of judged evidence outputs that were flagged, over
// n judged; n = 0 means no figure.
func (r Replay) Recall() (rec float64, n int) {
	if r.EvidenceJudged == 0 {
		return 0, 0
	}
	return float64(r.EvidenceFlagged) / float64(r.EvidenceJudged), r.EvidenceJudged
}

// maxSimilarNamed bounds the guidance a summary names.
const maxSimilarNamed = 3

// Summary says the preview in one line, e.g. "Addresses 14 past
// negatives (3 agents, 5 epics) · could over-correct 6 of 40 approvals ·
// similar: r-1a2b · LLM replay: precision 0.83 (n=12) recall 0.75 (n=8)".
func (p Preview) Summary() string {
	if p.Pending {
		return "Impact preview pending"
	}
	addressed := p.CategoryNegatives
	if p.Cluster.Total > addressed.Total {
		addressed = p.Cluster
	}
	parts := []string{fmt.Sprintf("Addresses %d past %s (%d %s, %d %s)", addressed.Total, text.Plural(addressed.Total, "negative", "negatives"),
		len(addressed.ByAgent), text.Plural(len(addressed.ByAgent), "agent", "agents"), addressed.epics(), text.Plural(addressed.epics(), "epic", "epics"))}
	if p.Category != "" {
		parts[0] += " in " + p.Category
	}
	if len(p.Added) > 0 {
		parts = append(parts, "adds what no reviewer asked for: “"+strings.Join(p.Added, "”; “")+"”")
	}
	parts = append(parts, fmt.Sprintf("could over-correct %d of %d %s in scope", p.OverCorrect.Total, p.ApprovalsInScope, text.Plural(p.ApprovalsInScope, "approval", "approvals")))
	var similar, opposing []string
	for _, s := range p.Similar {
		name := s.Path
		if s.RuleID != "" {
			name = s.RuleID
		}
		switch {
		case s.Opposing && len(opposing) < maxSimilarNamed:
			opposing = append(opposing, name)
		case !s.Opposing && len(similar) < maxSimilarNamed:
			similar = append(similar, name)
		}
	}
	if len(opposing) > 0 {
		parts = append(parts, "opposite: "+strings.Join(opposing, ", "))
	}
	if len(similar) > 0 {
		parts = append(parts, "similar: "+strings.Join(similar, ", "))
	}
	if len(opposing)+len(similar) == 0 {
		parts = append(parts, "nothing similar on main")
	}
	if p.SimilarLeftOut > 0 {
		parts[len(parts)-1] += fmt.Sprintf(" (%d %s on main not compared: cap of %d)", p.SimilarLeftOut,
			text.Plural(p.SimilarLeftOut, "passage", "passages"), maxPassages)
	}
	switch p.Replay.State {
	case ReplayPending:
		s := "LLM replay pending"
		if p.Replay.Attempts > 0 {
			s += fmt.Sprintf(" (%d %s failed, LLM unavailable; retry at %s)", p.Replay.Attempts,
				text.Plural(p.Replay.Attempts, "attempt", "attempts"), p.Replay.RetryAt.UTC().Format("15:04 UTC"))
		} else if !p.Replay.RetryAt.IsZero() {
			s += fmt.Sprintf(" (call budget spent; from %s)", p.Replay.RetryAt.UTC().Format("15:04 UTC"))
		}
		parts = append(parts, s)
	case ReplayDone:
		parts = append(parts, "LLM replay: "+p.Replay.figures())
	}
	return strings.Join(parts, " · ")
}

func (r Replay) figures() string {
	prec, pn := r.Precision()
	rec, rn := r.Recall()
	s := "precision " + figure(prec, pn) + " recall " + figure(rec, rn)
	if lost := r.Malformed + r.Timeouts + r.Errors; lost > 0 {
		s += fmt.Sprintf(" (%d %s without a verdict)", lost, text.Plural(lost, "call", "calls"))
	}
	return s
}

func figure(v float64, n int) string {
	if n == 0 {
		return "– (n=0)"
	}
	return fmt.Sprintf("%.2f (n=%d)", v, n)
}

// clone copies a preview so callers never share its maps.
func (p Preview) clone() Preview {
	p.Cluster, p.CategoryNegatives, p.OverCorrect = p.Cluster.clone(), p.CategoryNegatives.clone(), p.OverCorrect.clone()
	p.Scope.Agents = slices.Clone(p.Scope.Agents)
	p.Scope.Gates = slices.Clone(p.Scope.Gates)
	p.Scope.PathPrefixes = slices.Clone(p.Scope.PathPrefixes)
	p.Similar = slices.Clone(p.Similar)
	p.Added = slices.Clone(p.Added)
	return p
}
