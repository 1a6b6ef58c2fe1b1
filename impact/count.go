package impact

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Feedback is what a preview reads of the feedback store.
type Feedback interface {
	// Decision returns one stored decision.
	Decision(ctx context.Context, id string) (precept.Decision, error)
	// Since returns up to limit decisions numbered after seq.
	Since(seq uint64, limit int) ([]feedbackstore.Record, error)
	// Position is where the store's index stands: the number of the
	// last indexed entry, how many decisions are stored and its
	// generation, read together.
	Position() (feedbackstore.Position, error)
}

var _ Feedback = (*feedbackstore.Store)(nil)

// Evaluations is what a preview reads of the evaluator.
type Evaluations interface {
	// EachPlacement calls fn with the cluster and lesson category of
	// each of ids, in order, ok false while it has no evaluation: all a
	// count reads of a negative decision, without decoding its
	// evaluation.
	EachPlacement(ctx context.Context, ids [][]byte, fn func(i int, cluster, category []byte, ok bool)) error
	// Cluster returns one cluster.
	Cluster(ctx context.Context, id string) (evaluator.ClusterView, error)
}

var _ Evaluations = struct {
	evaluator.Placements
	*evaluator.Service
}{}

// Lessons gives the classifier of the current taxonomy; lesson.Source
// implements it.
type Lessons interface {
	Classifier() *lesson.Classifier
}

var _ Lessons = (*lesson.Source)(nil)

// scanPage is how many decisions a scan reads at a time.
const scanPage = 512

// maxEvidence bounds the evidence decisions read to find the scope.
const maxEvidence = 500

// output is an agent output the replay may judge.
type output struct {
	DecisionID string
	Text       string
}

// tally is what one scan of the feedback store finds. It keeps only
// what the replay can use: at most target.maxOutputs evidence outputs and
// the approval sample, each redacted and cut to maxOutputChars as it is
// read, so a proposal with thousands of evidence decisions of 256 KiB
// each holds kilobytes, not gigabytes, through its replay.
type tally struct {
	preview      Preview
	evidence     []output // evidence decisions with an agent output, the first maxOutputs
	evidenceSeen int      // evidence decisions with an agent output
	approvals    []output // approvals in scope with an agent output, sampled
}

// target is what a scan looks for.
type target struct {
	proposalID string
	agents     []string
	clusters   []string
	category   string
	scope      Scope
	evidence   map[string]bool
	sample     int
	// maxOutputs bounds the evidence outputs kept: the replay's call cap.
	maxOutputs int
}

// category finds the lesson category a proposal addresses: its cluster's,
// else the category its own text classifies into.
func category(ctx context.Context, ev Evaluations, cls *lesson.Classifier, p rulefmt.Proposal) (string, error) {
	if p.ClusterID != "" {
		c, err := ev.Cluster(ctx, p.ClusterID)
		switch {
		case err == nil && c.Category != "" && c.Category != lesson.Unclear:
			return c.Category, nil
		case err != nil && precept.ErrorCode(err) != precept.NotFound:
			return "", fmt.Errorf("read cluster %s: %w", p.ClusterID, err)
		}
	}
	agent := ""
	if len(p.Agents) > 0 {
		agent = p.Agents[0]
	}
	r := cls.Classify(lesson.Input{Comment: p.Content, Tags: p.Tags, Agent: agent})
	if r.Category == lesson.Unclear {
		return "", nil
	}
	return r.Category, nil
}

// scopeOf derives the scope from the evidence decisions: their agents'
// intersection with the proposal's, their gates, and the directories of
// their scope paths. A gate or path the evidence does not name widens
// the scope to any (docs/lifecycle.md, "Impact preview").
func scopeOf(agents []string, evidence []precept.Decision) Scope {
	s := Scope{Agents: slices.Sorted(slices.Values(agents))}
	anyGate, anyPath := len(evidence) == 0, len(evidence) == 0
	var dirs []string
	for _, d := range evidence {
		if d.GateID == "" {
			anyGate = true
		} else if !slices.Contains(s.Gates, d.GateID) {
			s.Gates = append(s.Gates, d.GateID)
		}
		dir := path.Dir(strings.TrimPrefix(path.Clean("/"+d.ScopePath), "/"))
		if d.ScopePath == "" || dir == "." {
			anyPath = true
		} else {
			dirs = append(dirs, dir)
		}
	}
	if anyGate {
		s.Gates = nil
	}
	slices.Sort(s.Gates)
	if !anyPath {
		s.PathPrefixes = outermost(dirs)
	}
	return s
}

// outermost keeps the directories no other one contains, sorted.
func outermost(dirs []string) []string {
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	var out []string
	for _, d := range dirs {
		if !slices.ContainsFunc(out, func(o string) bool { return under(d, o) }) {
			out = append(out, d)
		}
	}
	return out
}

// under reports whether p is dir or lies below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// in reports whether an approved decision of agent at gate lies in the
// scope; scoped is its scope path as scopePath cleans it, named whether
// it names one.
func (s Scope) in(agent, gate, scoped string, named bool) bool {
	if !slices.Contains(s.Agents, agent) {
		return false
	}
	if len(s.Gates) > 0 && !slices.Contains(s.Gates, gate) {
		return false
	}
	if len(s.PathPrefixes) == 0 {
		return true
	}
	return named && slices.ContainsFunc(s.PathPrefixes, func(dir string) bool { return under(scoped, dir) })
}

// readEvidence reads the proposal's evidence decisions, at most
// maxEvidence; decisions no longer stored are skipped.
func readEvidence(ctx context.Context, fb Feedback, ids []string) ([]precept.Decision, error) {
	var out []precept.Decision
	for _, id := range ids[:min(len(ids), maxEvidence)] {
		d, err := fb.Decision(ctx, id)
		if precept.ErrorCode(err) == precept.NotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read evidence decision %s: %w", id, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// maxAddedRunes clips an added clause as a preview names it.
const maxAddedRunes = 200

// added are the clauses of a rule text no evidence decision's comment
// asks for (lesson.SupportsFirmly, as the evidence guard judges them);
// none when there is no evidence to compare with. known are the clauses
// the proposal records: one from an edit or a model needs firm support
// (rulefmt.FirmSource), and so does one the proposal does not record
// when it records any or its text was edited (edited), as only an edit
// adds such a clause.
func added(content string, evidence []precept.Decision, known []rulefmt.Clause, edited bool) []string {
	var said []string
	for _, d := range evidence {
		if c := strings.TrimSpace(d.ReviewerComment); c != "" {
			said = append(said, safetext.Redact(text.ClipRunes(c, maxCommentRunes)))
		}
	}
	advice := rulefmt.Advice(safetext.Redact(content))
	if len(said) == 0 || advice == "" {
		return nil
	}
	firm := func(clause string) bool {
		if k, ok := rulefmt.KnownClause(known, strings.TrimRight(clause, ". ")); ok {
			return rulefmt.FirmSource(k.Source)
		}
		return len(known) > 0 || edited
	}
	var out []string
	for _, s := range lesson.SupportsFirmly(advice, said, firm) {
		if !s.Supported() {
			out = append(out, text.ClipWords(strings.TrimRight(s.Clause, ". "), maxAddedRunes))
		}
	}
	return out
}

// maxCommentRunes bounds the part of a comment read for support.
const maxCommentRunes = 4000

// counter keeps the ledger between counts (incremental.go);
// Service.computeMu guards it.
type counter struct {
	l *ledger
}

// reset forgets the ledger: the next count reads it from the first
// decision.
func (c *counter) reset() { c.l = nil }

// scan counts what each target looks for in the decisions numbered up to
// pos.seq, their comments classified with cls: tally k is target k's. It
// reads of the store only the decisions numbered since the last count,
// once for all targets (docs/lifecycle.md, "Impact preview").
func (c *counter) scan(ctx context.Context, fb Feedback, ev Evaluations, cls *lesson.Classifier, ts []target, pos position) ([]tally, error) {
	err := c.extend(ctx, fb, cls, pos)
	if errors.Is(err, errMoved) {
		c.reset()
		err = c.extend(ctx, fb, cls, pos)
	}
	if err != nil {
		return nil, err
	}
	tls, err := c.count(ctx, ev, ts)
	if err != nil {
		return nil, err
	}
	for k := range tls {
		if tls[k].evidence, err = withTexts(ctx, fb, tls[k].evidence); err != nil {
			return nil, err
		}
		if tls[k].approvals, err = withTexts(ctx, fb, tls[k].approvals); err != nil {
			return nil, err
		}
	}
	return tls, nil
}

// extend brings the ledger up to pos: from the first decision when it
// has none, or its generation or classifier is not pos's or cls, else
// with the decisions numbered since. A ledger extended to a position whose
// decisions no longer add up to its count gives errMoved; one read from
// the first decision takes the store's count as its own. A ledger it
// fails to finish is dropped.
func (c *counter) extend(ctx context.Context, fb Feedback, cls *lesson.Classifier, pos position) (err error) {
	if c.l == nil || c.l.generation != pos.generation || c.l.cls != cls || c.l.seq > pos.seq {
		c.l = &ledger{generation: pos.generation, cls: cls}
	}
	l := c.l
	defer func() {
		if err != nil {
			c.l = nil
		}
	}()
	classify := func(d precept.Decision) string { return cls.Classify(lesson.InputOf(d)).Category }
	from := l.seq
	for seq := from; seq < pos.seq; {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := fb.Since(seq, scanPage)
		if err != nil {
			return fmt.Errorf("read decisions: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			seq = r.Seq
			if r.Seq > pos.seq {
				break
			}
			l.seen++
			l.add(r.Decision, classify)
		}
	}
	l.seq = pos.seq
	if from == 0 {
		l.seen = pos.count
	} else if l.seen != pos.count {
		return errMoved
	}
	return nil
}

// count counts what each target looks for in the ledger: of the
// proposal's agents, the approvals in scope (and those in its category,
// with the sample of their outputs), the evidence outputs, and the
// negative decisions by where the evaluator places them — in its
// clusters, in its category, or nowhere yet (Preview.Unevaluated, stale
// until they are evaluated and counted at a later computation). The
// outputs it returns carry no text yet.
func (c *counter) count(ctx context.Context, ev Evaluations, ts []target) ([]tally, error) {
	l := c.l
	tls := make([]tally, len(ts))
	sampled := make([][]sampledOutput, len(ts))
	// byAgent[a] are the targets of agent a.
	byAgent := make([][]int, l.agents.Len())
	for k, t := range ts {
		for _, a := range t.agents {
			if id, ok := l.agents.Lookup(a); ok && !slices.Contains(byAgent[id], k) {
				byAgent[id] = append(byAgent[id], k)
			}
		}
	}
	var ids [][]byte
	var rows []int
	flush := func() error {
		err := ev.EachPlacement(ctx, ids, func(i int, cluster, category []byte, ok bool) {
			r := l.rows[rows[i]]
			agent, epic := l.agents.Strings()[r.agent], l.epics.Strings()[r.epic]
			for _, k := range byAgent[r.agent] {
				t, pv := ts[k], &tls[k].preview
				if !ok {
					pv.Unevaluated++
					continue
				}
				if len(cluster) > 0 && slices.ContainsFunc(t.clusters, func(c string) bool { return c == string(cluster) }) {
					pv.Cluster.add(agent, epic)
				}
				if t.category != "" && string(category) == t.category {
					pv.CategoryNegatives.add(agent, epic)
				}
			}
		})
		ids, rows = ids[:0], rows[:0]
		if err != nil {
			return fmt.Errorf("read placements: %w", err)
		}
		return nil
	}
	for i, r := range l.rows {
		ks := byAgent[r.agent]
		if len(ks) == 0 {
			continue
		}
		id := l.id(i)
		if r.flags&negative == 0 {
			for _, k := range ks {
				countApproval(ts[k], l, r, id, &tls[k], &sampled[k])
			}
			continue
		}
		if r.flags&hasOutput != 0 {
			for _, k := range ks {
				if t, tl := ts[k], &tls[k]; t.evidence[string(id)] {
					tl.evidenceSeen++
					if len(tl.evidence) < t.maxOutputs {
						tl.evidence = append(tl.evidence, output{DecisionID: string(id)})
					}
				}
			}
		}
		ids, rows = append(ids, id), append(rows, i)
		if len(ids) == scanPage {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	for k := range tls {
		for _, s := range sampled[k] {
			tls[k].approvals = append(tls[k].approvals, s.output)
		}
	}
	return tls, nil
}

// countApproval counts the approval of row r, whose id is id, for t.
func countApproval(t target, l *ledger, r row, id []byte, tl *tally, sampled *[]sampledOutput) {
	agent, epic := l.agents.Strings()[r.agent], l.epics.Strings()[r.epic]
	if !t.scope.in(agent, l.gates.Strings()[r.gate], l.paths.Strings()[r.path], r.flags&hasPath != 0) {
		return
	}
	tl.preview.ApprovalsInScope++
	inCategory := t.category != "" && l.categories.Strings()[r.category] == t.category
	if inCategory {
		tl.preview.OverCorrect.add(agent, epic)
	}
	if r.flags&hasOutput != 0 && t.sample > 0 {
		*sampled = keepSample(*sampled, sampleRank(t.proposalID, id, inCategory), t.sample, id)
	}
}

// sampledOutput is an approved output with its rank in the sample.
type sampledOutput struct {
	rank uint64
	output
}

// sampleRank orders approved outputs for sampling: those the rule could
// over-correct (their comment is in its category) first, then the other
// approvals in scope, each by a hash of the proposal and decision ids, so
// the same proposal always samples the same decisions and different
// proposals sample different ones.
func sampleRank(proposalID string, decisionID []byte, inCategory bool) uint64 {
	h := fnv.New64a()
	h.Write([]byte(proposalID))
	h.Write([]byte{0})
	h.Write(decisionID)
	r := h.Sum64() >> 1
	if !inCategory {
		r |= 1 << 63
	}
	return r
}

// replayText is an agent output as the replay shows it: secrets redacted
// first, so that the cut cannot leave half a secret the patterns miss,
// then cut to maxOutputChars.
func replayText(s string) string {
	return text.Fit(safetext.Redact(s), maxOutputChars)
}

// keepSample keeps the n lowest-ranked outputs, sorted by rank: it adds
// the one of decision id, ranked rank, when it is among them.
func keepSample(s []sampledOutput, rank uint64, n int, id []byte) []sampledOutput {
	if n <= 0 {
		return s
	}
	i, _ := slices.BinarySearchFunc(s, rank, func(x sampledOutput, r uint64) int {
		switch {
		case x.rank < r:
			return -1
		case x.rank > r:
			return 1
		}
		return 0
	})
	if i >= n {
		return s
	}
	s = slices.Insert(s, i, sampledOutput{rank: rank, output: output{DecisionID: string(id)}})
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// outputs are what the replay of the scan's proposal judges.
func (t tally) outputs() outputs {
	return outputs{evidence: t.evidence, evidenceSeen: t.evidenceSeen, approvals: t.approvals}
}

var errNoAgents = errors.New("the proposal names no agent")
