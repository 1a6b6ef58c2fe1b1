package evaluator

import (
	"maps"
	"slices"
	"time"

	"github.com/precept-dev/precept/lesson"
)

// Class is what the evaluator concluded about a decision
// (docs/thresholds.md, "Cluster support").
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

// ActionType is what the evaluator proposes to do about a decision.
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
	// Priority is "low" or "high".
	Priority string `json:"priority,omitempty"`
}

// Stats count what supports a cluster: distinct people and contexts,
// never raw totals alone (docs/thresholds.md).
type Stats struct {
	Size              int `json:"size"`
	DistinctReviewers int `json:"distinct_reviewers"`
	DistinctEpics     int `json:"distinct_epics"`
	// DistinctProducers counts who handed the decisions to precept
	// (precept.Feedback.Producer); Producers names them.
	DistinctProducers int       `json:"distinct_producers"`
	Producers         []string  `json:"producers,omitempty"`
	Agents            []string  `json:"agents"`
	FirstSeen         time.Time `json:"first_seen"`
	LastSeen          time.Time `json:"last_seen"`
	// NotAPattern: a curator said the cluster is no pattern.
	NotAPattern bool `json:"not_a_pattern,omitempty"`
}

// Evaluation is the evaluator's judgement of one HITL decision.
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
	// Lesson is what the decision teaches (docs/lessons.md); nil for
	// approvals and decisions without a comment or correction.
	Lesson *lesson.Lesson `json:"lesson,omitempty"`
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
	DecisionID string `json:"decision_id"`
	Agent      string `json:"agent"`
	ReviewerID string `json:"reviewer_id"`
	EpicID     string `json:"epic_id"`
	Producer   string `json:"producer,omitempty"`
	Text       string `json:"text"`
	// Asked is what the reviewer asked for, from the lesson.
	Asked string    `json:"asked,omitempty"`
	Tags  []string  `json:"tags,omitempty"`
	At    time.Time `json:"at"`
	// Similarity to the member it joined through (1 for the first).
	Similarity float64 `json:"similarity"`
	// Categories are the lesson's categories with weights
	// (lesson.Taxonomy.Weights); members stored before they were
	// recorded count as their cluster's category alone.
	Categories map[string]float64 `json:"categories,omitempty"`
}

// Cluster is a group of similar clear negative feedback. Its id is fixed
// when it is founded and never changes. It keeps running counts, so adding
// a member costs the same however large the cluster is; the members
// themselves are stored apart (Service.members).
type Cluster struct {
	ID    string `json:"id"`
	Class Class  `json:"class"`
	// Agent says whose lessons it groups: clusters never cross agents.
	// Category is the category its members' weights favour; a cluster
	// may hold lessons of its neighbouring categories (docs/lessons.md).
	Agent    string `json:"agent"`
	Category string `json:"category"`
	// NotAPattern says a curator marked the cluster (most of its members)
	// as no pattern: it stays an edge case whatever its support.
	NotAPattern bool `json:"not_a_pattern,omitempty"`
	// Sum adds up the members' unit vectors: the mean similarity of a
	// vector v to the members is v·Sum/Size (average linkage).
	Sum []float32 `json:"sum,omitempty"`
	// CategorySum adds up the members' category weights, as Sum adds up
	// their vectors; nil for a cluster stored before weights were kept,
	// whose members count as its category alone.
	CategorySum map[string]float64 `json:"category_sum,omitempty"`
	// Revision increases whenever the cluster's class changes.
	Revision  int       `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Size      int       `json:"size"`
	// Reviewers, Epics, Agents and TagCounts count members per value.
	Reviewers map[string]int `json:"reviewers"`
	Epics     map[string]int `json:"epics"`
	Agents    map[string]int `json:"agents"`
	TagCounts map[string]int `json:"tags,omitempty"`
	// Producers counts members per producer; clusters stored before
	// producers were recorded start counting at their next member.
	Producers map[string]int `json:"producers,omitempty"`
	FirstSeen time.Time      `json:"first_seen"`
	LastSeen  time.Time      `json:"last_seen"`
	// SimSum adds up the similarity through which each member after the
	// founder joined.
	SimSum float64 `json:"sim_sum"`
}

func newCluster(id string, now time.Time) *Cluster {
	return &Cluster{ID: id, Class: EdgeCase, CreatedAt: now, Reviewers: map[string]int{}, Epics: map[string]int{}, Agents: map[string]int{}, TagCounts: map[string]int{}}
}

// add counts a new member.
func (c *Cluster) add(m Member) {
	if c.Reviewers == nil {
		c.Reviewers, c.Epics, c.Agents = map[string]int{}, map[string]int{}, map[string]int{}
	}
	if c.TagCounts == nil {
		c.TagCounts = map[string]int{}
	}
	if c.Producers == nil {
		c.Producers = map[string]int{}
	}
	if m.Producer != "" {
		c.Producers[m.Producer]++
	}
	if c.Size > 0 {
		c.SimSum += m.Similarity
	}
	c.CategorySum = addWeights(c.categorySum(), m.weights(c.Category))
	c.Size++
	c.Reviewers[m.ReviewerID]++
	c.Epics[m.EpicID]++
	c.Agents[m.Agent]++
	for _, t := range m.Tags {
		c.TagCounts[t]++
	}
	if c.FirstSeen.IsZero() || m.At.Before(c.FirstSeen) {
		c.FirstSeen = m.At
	}
	if m.At.After(c.LastSeen) {
		c.LastSeen = m.At
	}
}

// Stats returns the cluster's support.
func (c *Cluster) Stats() Stats {
	return Stats{
		Size: c.Size, DistinctReviewers: len(c.Reviewers), DistinctEpics: len(c.Epics),
		DistinctProducers: len(c.Producers), Producers: slices.Sorted(maps.Keys(c.Producers)),
		Agents: slices.Sorted(maps.Keys(c.Agents)), FirstSeen: c.FirstSeen, LastSeen: c.LastSeen, NotAPattern: c.NotAPattern,
	}
}

// Tags returns the union of the members' tags.
func (c *Cluster) Tags() []string { return slices.Sorted(maps.Keys(c.TagCounts)) }

func (c *Cluster) meanSimilarity() float64 {
	if c.Size < 2 {
		return 1
	}
	return c.SimSum / float64(c.Size-1)
}

// clone copies a cluster, for dry runs.
func (c *Cluster) clone() *Cluster {
	cp := *c
	cp.Reviewers, cp.Epics, cp.Agents, cp.TagCounts = maps.Clone(c.Reviewers), maps.Clone(c.Epics), maps.Clone(c.Agents), maps.Clone(c.TagCounts)
	cp.Producers = maps.Clone(c.Producers)
	cp.Sum, cp.CategorySum = slices.Clone(c.Sum), maps.Clone(c.CategorySum)
	return &cp
}

// Representative is a member comment close to its cluster's centre.
type Representative struct {
	DecisionID string  `json:"decision_id"`
	ReviewerID string  `json:"reviewer_id"`
	Agent      string  `json:"agent"`
	Text       string  `json:"text"`
	Centrality float64 `json:"centrality"`
}
