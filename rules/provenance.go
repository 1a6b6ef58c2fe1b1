package rules

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// saidTexts are the evidence's words a clause may be supported by — its
// representative comments and what its reviewers asked for — with the
// decision each came from ("" when the source does not say).
func saidTexts(ev rulefmt.Evidence) (said, by []string) {
	// Secrets are redacted first: clauses and the words they share are
	// committed with the proposal.
	for _, c := range ev.Comments {
		said = append(said, safetext.Redact(text.ClipRunes(c.Text, maxCommentRunes)))
		by = append(by, c.DecisionID)
	}
	for i, a := range ev.Asked {
		said = append(said, safetext.Redact(text.ClipRunes(a, maxCommentRunes)))
		id := ""
		if i < len(ev.AskedBy) {
			id = ev.AskedBy[i]
		}
		by = append(by, id)
	}
	return said, by
}

// decisionsOf names the decisions behind the evidence texts at idx,
// distinct and sorted; when none of those texts says its decision, the
// cluster stands for them ("cluster:<id>").
func decisionsOf(idx []int, by []string, clusterID string) []string {
	var out []string
	unknown := false
	for _, i := range idx {
		if by[i] == "" {
			unknown = true
			continue
		}
		out = append(out, by[i])
	}
	if len(out) == 0 && unknown {
		return []string{"cluster:" + clusterID}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// attribute cuts a rule text into clauses and says, for each, which
// decisions of the evidence ask for it (lesson.SupportsFirmly). known
// are the clauses whose source the drafter knows; any other clause is
// given source. Only the source and category of a known clause are
// taken: its decisions and words are always recomputed. A clause from an
// edit or a model needs firm support (rulefmt.FirmSource).
func attribute(content string, ev rulefmt.Evidence, known []rulefmt.Clause, source string) []rulefmt.Clause {
	body := rulefmt.Advice(safetext.Redact(content))
	if body == "" {
		return nil
	}
	sourceOf := func(clause string) (string, string) {
		if k, ok := rulefmt.KnownClause(known, strings.TrimRight(clause, ". ")); ok {
			return k.Source, k.Category
		}
		return source, ""
	}
	firm := func(clause string) bool {
		s, _ := sourceOf(clause)
		return rulefmt.FirmSource(s)
	}
	said, by := saidTexts(ev)
	var out []rulefmt.Clause
	for _, s := range lesson.SupportsFirmly(body, said, firm) {
		src, category := sourceOf(s.Clause)
		out = append(out, rulefmt.Clause{Text: strings.TrimRight(s.Clause, ". "), Source: src, Category: category,
			Decisions: decisionsOf(s.Evidence, by, ev.ClusterID), Words: s.Words})
	}
	return out
}

// sourceFor is the source of the clauses of a text drafted by drafter
// (Proposal.DraftedBy) that the draft does not name: the model's for an
// LLM draft, else the reviewers'.
func sourceFor(drafter string) string {
	if strings.HasPrefix(drafter, "llm:") {
		return rulefmt.SourceModel
	}
	return rulefmt.SourceReviewers
}

// evidenceGuard says whether every clause is asked for by the evidence,
// naming those that go beyond it (docs/lessons.md, "Rules no wider than
// the evidence").
func evidenceGuard(clauses []rulefmt.Clause) rulefmt.GuardResult {
	var beyond []string
	from := map[string]int{}
	for _, c := range clauses {
		if c.Beyond() {
			beyond = append(beyond, "“"+text.ClipWords(safetext.Redact(c.Text), 200)+"”")
			continue
		}
		from[c.Source]++
	}
	if len(beyond) > 0 {
		return rulefmt.GuardResult{Guard: rulefmt.GuardEvidence, Reason: fmt.Sprintf("goes beyond the evidence: %s %s asked for by no comment of it; approve only if you mean to add %s",
			strings.Join(beyond, "; "), text.Plural(len(beyond), "is", "are"), text.Plural(len(beyond), "it", "them"))}
	}
	var parts []string
	for _, s := range []string{rulefmt.SourceReviewers, rulefmt.SourceGuidance, rulefmt.SourceModel, rulefmt.SourceEdit} {
		if n := from[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, sourceWords[s]))
		}
	}
	if len(parts) == 0 {
		return rulefmt.GuardResult{Guard: rulefmt.GuardEvidence, Passed: true}
	}
	return rulefmt.GuardResult{Guard: rulefmt.GuardEvidence, Passed: true, Reason: "every clause is asked for by the evidence: " + strings.Join(parts, ", ")}
}

var sourceWords = map[string]string{
	rulefmt.SourceReviewers: "in the reviewers' words",
	rulefmt.SourceGuidance:  "from the category's guidance",
	rulefmt.SourceModel:     "written by the model",
	rulefmt.SourceEdit:      "edited in",
}

// checkEdit runs the evidence guard on a proposal's text as edited on a
// remote: against its cluster's evidence when the evidence source still
// has it, the clauses the draft recorded keeping their source.
// Otherwise the guard is not passed and says it could not check: the
// impact preview, which reads the evidence decisions themselves, is the
// check (docs/lessons.md, "Rules no wider than the evidence").
func (m *Manager) checkEdit(ctx context.Context, p rulefmt.Proposal, content, remote string) ([]rulefmt.Clause, []rulefmt.GuardResult) {
	if p.Kind == rulefmt.KindConsolidation {
		return nil, []rulefmt.GuardResult{{Guard: rulefmt.GuardEvidence, Passed: true,
			Reason: "not checked on the text edited on " + remote + ": a consolidation carries the text of rules approved on their own evidence"}}
	}
	if ev, ok := m.clusterEvidence(ctx, p.ClusterID); ok {
		clauses := attribute(content, ev, p.Clauses, rulefmt.SourceEdit)
		return clauses, []rulefmt.GuardResult{evidenceGuard(clauses)}
	}
	return nil, []rulefmt.GuardResult{{Guard: rulefmt.GuardEvidence, Passed: false,
		Reason: "could not be checked on the text edited on " + remote + ": its cluster's evidence is not at hand; the impact preview checks the text against its decisions"}}
}

// clusterEvidence is a cluster's evidence from the evidence source, if
// the cluster is still generalizable: read alone when the source can
// (rulefmt.ClusterEvidenceSource), else found among every cluster.
func (m *Manager) clusterEvidence(ctx context.Context, clusterID string) (rulefmt.Evidence, bool) {
	if clusterID == "" || m.opts.Evidence == nil {
		return rulefmt.Evidence{}, false
	}
	if one, ok := m.opts.Evidence.(rulefmt.ClusterEvidenceSource); ok {
		ev, found, err := one.ClusterEvidence(ctx, clusterID)
		if err != nil {
			m.log.Warn("read the evidence to check an edited rule text", "cluster_id", clusterID, "err", err)
			return rulefmt.Evidence{}, false
		}
		if !found {
			return rulefmt.Evidence{}, false
		}
		return m.policy.normalizeEvidence(ev)
	}
	evs, err := m.opts.Evidence.Generalizable(ctx)
	if err != nil {
		m.log.Warn("read the evidence to check an edited rule text", "cluster_id", clusterID, "err", err)
		return rulefmt.Evidence{}, false
	}
	for _, ev := range evs {
		if ev.ClusterID == clusterID {
			return m.policy.normalizeEvidence(ev)
		}
	}
	return rulefmt.Evidence{}, false
}
