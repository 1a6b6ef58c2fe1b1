package impact

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/intern"
)

// Counting a preview used to read every stored decision, every time: at
// a million decisions that was seconds of decoding per new or changed
// proposal, beside the requests the service answers. Now every stored
// decision has a row in a ledger of what a count reads of it — its id,
// agent, epic, gate, scope path, verdict, whether it carries an agent
// output and, for an approval with a comment, the category the comment
// classifies into — extended with the decisions numbered since the last
// count (docs/lifecycle.md, "Impact preview"). A count walks the rows of
// its agents and reads the placements of their negative decisions from
// the evaluator; it decodes no stored decision but the few outputs a
// replay reads.
//
// A decision deleted or indexed again gives up its number: the store's
// count (Feedback.Position) then differs from the decisions in the
// ledger, and the ledger is read again from the first decision; so it is
// when the index was rebuilt (a new generation), as every number changed,
// and when the taxonomy's classifier was reloaded.

// position is where the feedback store stands: the last number given,
// how many decisions are stored, and the index's generation.
type position struct {
	seq        uint64
	count      int
	generation uint64
}

// ledger lists every stored decision as a row of 32 bytes and its id.
type ledger struct {
	generation uint64
	cls        *lesson.Classifier // the comments' categories are its
	seq        uint64             // the decisions numbered up to seq are in
	seen       int                // how many there were
	ids        []byte             // the ids, end to end
	rows       []row
	agents     intern.Table
	epics      intern.Table
	gates      intern.Table
	paths      intern.Table // scope paths as Scope reads them (scopePath)
	categories intern.Table
}

// row is one decision: its id is ids[previous row's end:end].
type row struct {
	end      uint64
	agent    uint32
	epic     uint32
	gate     uint32
	path     uint32
	category uint32 // an approval's comment's category; "" otherwise
	flags    uint8
}

// The flags of a row.
const (
	negative  uint8 = 1 << iota // REJECTED or APPROVED_WITH_CHANGES
	hasOutput                   // it carries an agent output
	hasPath                     // it names a scope path
)

// add appends d's row; classify gives an approval's comment its category.
func (l *ledger) add(d precept.Decision, classify func(precept.Decision) string) {
	l.ids = append(l.ids, d.DecisionID...)
	r := row{end: uint64(len(l.ids)), agent: l.agents.Of(d.Agent), epic: l.epics.Of(d.EpicID), gate: l.gates.Of(d.GateID),
		path: l.paths.Of(scopePath(d.ScopePath))}
	category := ""
	if d.Decision.Negative() {
		r.flags |= negative
	} else if strings.TrimSpace(d.ReviewerComment) != "" {
		category = classify(d)
	}
	r.category = l.categories.Of(category)
	if d.AgentOutput != "" {
		r.flags |= hasOutput
	}
	if d.ScopePath != "" {
		r.flags |= hasPath
	}
	l.rows = append(l.rows, r)
}

// id is row i's decision id, sharing the ledger's memory: ids written
// are never written again, so it stays valid as the ledger grows.
func (l *ledger) id(i int) []byte {
	start := uint64(0)
	if i > 0 {
		start = l.rows[i-1].end
	}
	end := l.rows[i].end
	return l.ids[start:end:end]
}

// scopePath is a scope path as a scope compares it: cleaned, without
// its leading slash.
func scopePath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// withTexts returns outs with each one's text: its decision's agent
// output as a replay shows it (replayText). An output whose decision is
// no longer stored is left out.
func withTexts(ctx context.Context, fb Feedback, outs []output) ([]output, error) {
	var with []output
	for _, o := range outs {
		d, err := fb.Decision(ctx, o.DecisionID)
		if precept.ErrorCode(err) == precept.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read output of %s: %w", o.DecisionID, err)
		}
		with = append(with, output{DecisionID: o.DecisionID, Text: replayText(d.AgentOutput)})
	}
	return with, nil
}

// errMoved is a ledger finding that decisions it holds were deleted or
// indexed again.
var errMoved = errors.New("stored decisions were deleted or indexed again since they were counted")
