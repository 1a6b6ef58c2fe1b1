package impact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
)

// Counting a preview used to read every stored decision, every time: at
// a million decisions that was seconds of decoding per new or changed
// proposal, beside the requests the service answers. Now what a count
// finds is kept and extended with the decisions numbered since
// (docs/lifecycle.md, "Impact preview"):
//
//   - what depends only on a decision's own fields — approvals in scope,
//     the ones the rule could over-correct, the approval sample, the
//     evidence outputs — per proposal (owned), as long as what it looks
//     for stays the same (target.key);
//   - what depends on where the evaluator places a decision — the
//     cluster and category counts, the unevaluated ones — changes without
//     the store moving, so it is counted again each time, from a compact
//     list of the negative decisions (negatives) and their placements,
//     without decoding a stored decision.
//
// A decision deleted or indexed again gives up its number: the store's
// count (Feedback.Position) then differs from the decisions counted,
// and the count starts from the first decision again.

// position is where the feedback store stands: the last number given
// and how many decisions are stored.
type position struct {
	seq   uint64
	count int
}

// names numbers strings: the agents and epics of the negatives.
type names struct {
	ids   map[string]uint32
	names []string
}

func (n *names) id(s string) uint32 {
	if id, ok := n.ids[s]; ok {
		return id
	}
	if n.ids == nil {
		n.ids = map[string]uint32{}
	}
	id := uint32(len(n.names))
	n.ids[s] = id
	n.names = append(n.names, s)
	return id
}

// negatives lists every stored negative decision with what the
// placement counts need of it: its id, agent and epic, 16 bytes and the
// id's a decision, so a million stored decisions take some tens of
// megabytes at most.
type negatives struct {
	seq    uint64 // the decisions numbered up to seq are in
	seen   int    // decisions of any kind numbered up to seq
	ids    []byte // the ids, end to end
	rows   []negative
	agents names
	epics  names
}

// negative is one negative decision: its id is ids[previous end:end].
type negative struct {
	end   uint64
	agent uint32
	epic  uint32
}

func (n *negatives) add(d precept.Decision) {
	n.ids = append(n.ids, d.DecisionID...)
	n.rows = append(n.rows, negative{end: uint64(len(n.ids)), agent: n.agents.id(d.Agent), epic: n.epics.id(d.EpicID)})
}

// id is row i's decision id.
func (n *negatives) id(i int) string {
	start := uint64(0)
	if i > 0 {
		start = n.rows[i-1].end
	}
	return string(n.ids[start:n.rows[i].end])
}

// owned is what a target counts of decisions' own fields, up to seq.
type owned struct {
	key          string
	cls          *lesson.Classifier
	seq          uint64
	seen         int // decisions of any kind numbered up to seq
	approvals    int // approvals in scope
	overCorrect  Counts
	evidence     []output
	evidenceSeen int
	sampled      []sampledOutput
	// sample and maxOutputs are the target's when the outputs were kept.
	sample, maxOutputs int
}

// serves reports whether o can be extended for t, classified with cls:
// it looks for the same, and kept at least the outputs t keeps.
func (o *owned) serves(t target, cls *lesson.Classifier, upTo uint64) bool {
	if o.key != t.key() || o.cls != cls || o.seq > upTo {
		return false
	}
	if t.sample == 0 && t.maxOutputs == 0 {
		return true
	}
	return o.sample == t.sample && o.maxOutputs == t.maxOutputs
}

// trim drops the outputs t does not keep: once a text's replay is done,
// nothing reads them again.
func (o *owned) trim(t target) {
	if t.sample == 0 && t.maxOutputs == 0 {
		o.evidence, o.sampled, o.sample, o.maxOutputs = nil, nil, 0, 0
	}
}

// key identifies what t looks for in decisions' own fields: two targets
// with the same key count the same. The clusters are not in it, as
// placements are counted each time.
func (t target) key() string {
	h := sha256.New()
	field := func(s ...string) {
		for _, x := range s {
			h.Write([]byte(x))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	field(t.proposalID, t.category)
	field(t.agents...)
	field(t.scope.Agents...)
	field(t.scope.Gates...)
	field(t.scope.PathPrefixes...)
	field(slices.Sorted(func(yield func(string) bool) {
		for id := range t.evidence {
			if !yield(id) {
				return
			}
		}
	})...)
	return hex.EncodeToString(h.Sum(nil))
}

// countOwn counts the decision of dv into o, for t.
func (t target) countOwn(dv *decisionView, o *owned) {
	d := dv.d
	if !slices.Contains(t.agents, d.Agent) {
		return
	}
	if d.Decision.Negative() {
		if t.evidence[d.DecisionID] && d.AgentOutput != "" {
			o.evidenceSeen++
			if len(o.evidence) < t.maxOutputs {
				o.evidence = append(o.evidence, output{d.DecisionID, replayText(d.AgentOutput)})
			}
		}
		return
	}
	if !t.scope.in(d) {
		return
	}
	o.approvals++
	inCategory := t.category != "" && strings.TrimSpace(d.ReviewerComment) != "" && dv.category() == t.category
	if inCategory {
		o.overCorrect.add(d.Agent, d.EpicID)
	}
	if d.AgentOutput != "" {
		s := sampledOutput{rank: sampleRank(t.proposalID, d.DecisionID, inCategory), output: output{DecisionID: d.DecisionID}}
		o.sampled = keepSample(o.sampled, s, t.sample, d.AgentOutput)
	}
}

// tally is o's counts as a scan's tally, sharing nothing with o.
func (o *owned) tally() tally {
	tl := tally{evidence: slices.Clone(o.evidence), evidenceSeen: o.evidenceSeen}
	tl.preview.ApprovalsInScope = o.approvals
	tl.preview.OverCorrect = o.overCorrect.clone()
	for _, s := range o.sampled {
		tl.approvals = append(tl.approvals, s.output)
	}
	return tl
}

// errMoved is a scan finding that decisions it had counted were deleted
// or indexed again.
var errMoved = errors.New("stored decisions were deleted or indexed again since they were counted")
