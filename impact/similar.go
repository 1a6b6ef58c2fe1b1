package impact

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/precept-dev/precept/embedding"
	"github.com/precept-dev/precept/internal/text"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules"
)

// Documents lists the guidance on main prompts are built from;
// prompts.Assembler implements it.
type Documents interface {
	Documents() (commit string, docs []prompts.Document)
}

var _ Documents = (*prompts.Assembler)(nil)

// Bounds of the comparison with main.
const (
	// maxPassages bounds the passages embedded per preview.
	maxPassages = 4000
	// maxExcerpt bounds a passage shown in a preview.
	maxExcerpt = 240
	// maxSimilar bounds the guidance a preview lists.
	maxSimilar = 10
)

// similar compares the rule with each piece of guidance on main: rules
// of the proposal's agents (but its own), every _rules.md file and every
// base prompt, passage by passage. A document is listed when its closest
// passage reaches the conflict band of the rules' thresholds, and is
// opposing when that passage gives the opposite instruction — the same
// bands and polarity cues as the conflict guard (rules/conflict.go).
func similar(ctx context.Context, emb embedding.Embedder, th rules.Thresholds, p rules.Proposal, docs []prompts.Document) ([]Similar, error) {
	type passage struct {
		doc  int
		text string
	}
	var ps []passage
	for i, d := range docs {
		if d.Kind == prompts.DocumentRule && (!slices.Contains(p.Agents, d.Agent) || d.RuleID == p.RuleID) {
			continue
		}
		for _, t := range passages(d.Text) {
			if len(ps) == maxPassages {
				break
			}
			ps = append(ps, passage{i, t})
		}
	}
	if len(ps) == 0 {
		return nil, nil
	}
	texts := make([]string, 0, len(ps)+1)
	texts = append(texts, p.Content)
	for _, x := range ps {
		texts = append(texts, x.text)
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed guidance on main: %w", err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embed guidance on main: got %d vectors for %d texts", len(vecs), len(texts))
	}
	best := map[int]Similar{}
	pol := rules.Polarity(p.Content)
	for j, x := range ps {
		sim := embedding.Cosine(vecs[0], vecs[j+1])
		if sim < th.Conflict || sim <= best[x.doc].Similarity {
			continue
		}
		d := docs[x.doc]
		best[x.doc] = Similar{Kind: d.Kind, Path: d.Path, RuleID: d.RuleID, Similarity: round3(sim),
			Opposing: pol*rules.Polarity(x.text) < 0, Excerpt: text.Fit(text.OneLine(x.text), maxExcerpt)}
	}
	out := make([]Similar, 0, len(best))
	for _, s := range best {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Similar) int {
		switch {
		case a.Similarity > b.Similarity:
			return -1
		case a.Similarity < b.Similarity:
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out[:min(len(out), maxSimilar)], nil
}

// passages splits a document into what is compared with a rule: its
// paragraphs and list items, without headings and blank lines.
func passages(doc string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(doc, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
			flush()
		case strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ") || numbered(l):
			flush()
			cur = append(cur, l)
		default:
			cur = append(cur, l)
		}
	}
	flush()
	return out
}

// numbered reports whether a line starts a numbered list item ("1. ").
func numbered(l string) bool {
	i := 0
	for i < len(l) && l[i] >= '0' && l[i] <= '9' {
		i++
	}
	return i > 0 && strings.HasPrefix(l[i:], ". ")
}

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }
