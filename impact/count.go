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
	// LastSeq is the number of the last indexed entry.
	LastSeq() (uint64, error)
}

var _ Feedback = (*feedbackstore.Store)(nil)

// Evaluations is what a preview reads of the evaluator.
type Evaluations interface {
	// Evaluation returns a decision's evaluation, or a NotFound error
	// while it has none.
	Evaluation(ctx context.Context, id string) (evaluator.Evaluation, string, error)
	// Placement returns a decision's cluster and lesson category, ok
	// false while it has no evaluation: all a scan reads of a negative
	// decision, without decoding its evaluation.
	Placement(ctx context.Context, id string) (cluster, category string, ok bool, err error)
	// Cluster returns one cluster.
	Cluster(ctx context.Context, id string) (evaluator.ClusterView, error)
}

var _ Evaluations = (*evaluator.Service)(nil)

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

// in reports whether an approved decision lies in the scope.
func (s Scope) in(d precept.Decision) bool {
	if !slices.Contains(s.Agents, d.Agent) {
		return false
	}
	if len(s.Gates) > 0 && !slices.Contains(s.Gates, d.GateID) {
		return false
	}
	if len(s.PathPrefixes) == 0 {
		return true
	}
	p := strings.TrimPrefix(path.Clean("/"+d.ScopePath), "/")
	return d.ScopePath != "" && slices.ContainsFunc(s.PathPrefixes, func(dir string) bool { return under(p, dir) })
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

// scan reads every stored decision up to seq once and counts what each
// target looks for: tally k is target k's. Previews due together share
// one read of the store (docs/lifecycle.md, "Impact preview").
func scan(ctx context.Context, fb Feedback, ev Evaluations, classify func(precept.Decision) string, ts []target, upTo uint64) ([]tally, error) {
	out := make([]tally, len(ts))
	sampled := make([][]sampledOutput, len(ts))
	for seq := uint64(0); seq < upTo; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := fb.Since(seq, scanPage)
		if err != nil {
			return nil, fmt.Errorf("read decisions: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			seq = r.Seq
			if r.Seq > upTo {
				break
			}
			// A decision's category and evaluation are read once for
			// all targets.
			dv := &decisionView{d: r.Decision, ev: ev, classify: classify}
			for k, t := range ts {
				if err := t.count(ctx, dv, &out[k], &sampled[k]); err != nil {
					return nil, err
				}
			}
		}
	}
	for k := range out {
		for _, s := range sampled[k] {
			out[k].approvals = append(out[k].approvals, s.output)
		}
	}
	return out, nil
}

// decisionView is one decision of a scan with what targets ask of it,
// read on first use.
type decisionView struct {
	d        precept.Decision
	ev       Evaluations
	classify func(precept.Decision) string
	cat      *string
	read     bool
	placed   placed
	evalErr  error
}

// placed is where a decision's evaluation puts it.
type placed struct {
	cluster, category string
	ok                bool
}

func (v *decisionView) category() string {
	if v.cat == nil {
		c := v.classify(v.d)
		v.cat = &c
	}
	return *v.cat
}

func (v *decisionView) placement(ctx context.Context) (placed, error) {
	if !v.read {
		v.placed.cluster, v.placed.category, v.placed.ok, v.evalErr = v.ev.Placement(ctx, v.d.DecisionID)
		v.read = true
	}
	return v.placed, v.evalErr
}

// count counts the decision of dv for t.
func (t target) count(ctx context.Context, dv *decisionView, out *tally, sampled *[]sampledOutput) error {
	d := dv.d
	if !slices.Contains(t.agents, d.Agent) {
		return nil
	}
	if d.Decision.Negative() {
		return t.countNegative(ctx, dv, out)
	}
	if !t.scope.in(d) {
		return nil
	}
	out.preview.ApprovalsInScope++
	inCategory := t.category != "" && strings.TrimSpace(d.ReviewerComment) != "" && dv.category() == t.category
	if inCategory {
		out.preview.OverCorrect.add(d.Agent, d.EpicID)
	}
	if d.AgentOutput != "" {
		o := sampledOutput{rank: sampleRank(t.proposalID, d.DecisionID, inCategory), output: output{DecisionID: d.DecisionID}}
		*sampled = keepSample(*sampled, o, t.sample, d.AgentOutput)
	}
	return nil
}

// countNegative counts a negative decision of the proposal's agents.
func (t target) countNegative(ctx context.Context, dv *decisionView, out *tally) error {
	d := dv.d
	if t.evidence[d.DecisionID] && d.AgentOutput != "" {
		out.evidenceSeen++
		if len(out.evidence) < t.maxOutputs {
			out.evidence = append(out.evidence, output{d.DecisionID, replayText(d.AgentOutput)})
		}
	}
	p, err := dv.placement(ctx)
	if err != nil {
		return fmt.Errorf("read evaluation %s: %w", d.DecisionID, err)
	}
	if !p.ok {
		// Not evaluated yet: the preview is stale until it is
		// (Preview.Unevaluated), and a later computation counts it.
		out.preview.Unevaluated++
		return nil
	}
	if p.cluster != "" && slices.Contains(t.clusters, p.cluster) {
		out.preview.Cluster.add(d.Agent, d.EpicID)
	}
	if t.category != "" && p.category == t.category {
		out.preview.CategoryNegatives.add(d.Agent, d.EpicID)
	}
	return nil
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
func sampleRank(proposalID, decisionID string, inCategory bool) uint64 {
	h := fnv.New64a()
	h.Write([]byte(proposalID))
	h.Write([]byte{0})
	h.Write([]byte(decisionID))
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

// keepSample keeps the n lowest-ranked outputs, sorted by rank; o gets
// its text, replayText(full), only when it is kept.
func keepSample(s []sampledOutput, o sampledOutput, n int, full string) []sampledOutput {
	if n <= 0 {
		return s
	}
	i, _ := slices.BinarySearchFunc(s, o.rank, func(x sampledOutput, r uint64) int {
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
	o.Text = replayText(full)
	s = slices.Insert(s, i, o)
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
