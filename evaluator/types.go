package evaluator

import (
	"time"
)

// Class is what the evaluator concluded about a decision (seed 004
// FeedbackClassification).
type Class string

// The classes, in the order of how much a decision supports a rule.
const (
	Positive          Class = "POSITIVE"
	Ambiguous         Class = "AMBIGUOUS"
	EdgeCase          Class = "EDGE_CASE"
	GeneralizableLow  Class = "GENERALIZABLE_LOW"
	GeneralizableHigh Class = "GENERALIZABLE_HIGH"
)

// rank orders the classes an LLM may move between: it may lower a
// decision's rank, never raise it.
func (c Class) rank() int {
	switch c {
	case Ambiguous:
		return 1
	case EdgeCase:
		return 2
	case GeneralizableLow:
		return 3
	case GeneralizableHigh:
		return 4
	}
	return 0
}

// Generalizable reports whether the class supports a rule.
func (c Class) Generalizable() bool { return c == GeneralizableLow || c == GeneralizableHigh }

// ActionType is what the evaluator proposes to do (seed 004
// ProposedAction.action_type).
type ActionType string

// The proposed actions.
const (
	CreateRule   ActionType = "CREATE_RULE"
	RefinePrompt ActionType = "REFINE_PROMPT"
	UpdateSkill  ActionType = "UPDATE_SKILL"
	DocumentOnly ActionType = "DOCUMENT_ONLY"
)

// Action is the next step the evaluator suggests for a decision.
type Action struct {
	Type        ActionType `json:"type"`
	TargetAgent string     `json:"target_agent,omitempty"`
	// ProposalID is the rule proposal drafted from the decision's cluster,
	// once there is one.
	ProposalID string `json:"proposal_id,omitempty"`
	// Priority is "low" or "high".
	Priority string `json:"priority,omitempty"`
}

// Stats count what supports a cluster: distinct people and contexts,
// never raw totals alone (seed 003).
type Stats struct {
	Size              int       `json:"size"`
	DistinctReviewers int       `json:"distinct_reviewers"`
	DistinctEpics     int       `json:"distinct_epics"`
	Agents            []string  `json:"agents"`
	FirstSeen         time.Time `json:"first_seen"`
	LastSeen          time.Time `json:"last_seen"`
}

// Evaluation is the evaluator's decision about one HITL decision (seed 004
// EvaluatorDecision).
type Evaluation struct {
	DecisionID string  `json:"decision_id"`
	Class      Class   `json:"class"`
	Confidence float64 `json:"confidence"`
	// Rationale says why, in terms a human can check against Stats.
	Rationale  string        `json:"rationale"`
	SimilarIDs []string      `json:"similar_ids,omitempty"`
	Action     *Action       `json:"action,omitempty"`
	ClusterID  string        `json:"cluster_id,omitempty"`
	Rubric     *RubricResult `json:"rubric,omitempty"`
	// Evaluator is "deterministic" or "llm:<model>".
	Evaluator   string    `json:"evaluator"`
	EvaluatedAt time.Time `json:"evaluated_at"`
	NeedsReview bool      `json:"needs_review,omitempty"`
	Stats       *Stats    `json:"stats,omitempty"`
	// Revision counts re-evaluations after the cluster grew.
	Revision int `json:"revision"`
}

// Member is what a cluster keeps of each decision in it.
type Member struct {
	DecisionID string    `json:"decision_id"`
	Agent      string    `json:"agent"`
	ReviewerID string    `json:"reviewer_id"`
	EpicID     string    `json:"epic_id"`
	Text       string    `json:"text"`
	Tags       []string  `json:"tags,omitempty"`
	At         time.Time `json:"at"`
	// Similarity to the member it joined through (1 for the first).
	Similarity float64 `json:"similarity"`
}

// Cluster is a group of similar clear negative feedback. Its id is fixed
// when it is founded and never changes.
type Cluster struct {
	ID      string   `json:"id"`
	Members []Member `json:"members"`
	Class   Class    `json:"class"`
	// Revision increases whenever the cluster's class changes.
	Revision  int       `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Stats computes the cluster's support.
func (c *Cluster) Stats() Stats {
	reviewers := map[string]bool{}
	epics := map[string]bool{}
	agents := map[string]bool{}
	var s Stats
	for i, m := range c.Members {
		reviewers[m.ReviewerID] = true
		epics[m.EpicID] = true
		agents[m.Agent] = true
		if i == 0 || m.At.Before(s.FirstSeen) {
			s.FirstSeen = m.At
		}
		if m.At.After(s.LastSeen) {
			s.LastSeen = m.At
		}
	}
	s.Size = len(c.Members)
	s.DistinctReviewers = len(reviewers)
	s.DistinctEpics = len(epics)
	s.Agents = sortedKeys(agents)
	return s
}

// Tags returns the union of the members' tags.
func (c *Cluster) Tags() []string {
	set := map[string]bool{}
	for _, m := range c.Members {
		for _, t := range m.Tags {
			set[t] = true
		}
	}
	return sortedKeys(set)
}

// Representative is a member comment close to its cluster's centre.
type Representative struct {
	DecisionID string  `json:"decision_id"`
	ReviewerID string  `json:"reviewer_id"`
	Agent      string  `json:"agent"`
	Text       string  `json:"text"`
	Centrality float64 `json:"centrality"`
}

// Review statuses of an ambiguous decision (seed 000 needs-review).
const (
	PendingClarification = "pending-clarification"
	NeedsHumanReview     = "needs-human-review"
	Resolved             = "resolved"
)

// NeedsReview is an ambiguous decision waiting for clarification.
type NeedsReview struct {
	DecisionID string    `json:"decision_id"`
	Agent      string    `json:"agent"`
	ReviewerID string    `json:"reviewer_id"`
	Comment    string    `json:"comment"`
	Missing    []string  `json:"missing"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	Replies    []string  `json:"replies,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	// AskedAt is when a clarification question was last posted.
	AskedAt time.Time `json:"asked_at,omitempty"`
	// Thread locates the Slack thread, once one was started.
	Thread string `json:"thread,omitempty"`
}
