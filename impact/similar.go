package impact

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/english"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Documents lists the guidance on main prompts are built from;
// prompts.Assembler implements it.
type Documents interface {
	Documents() (commit string, docs []prompts.Document)
}

var _ Documents = (*prompts.Assembler)(nil)

// Bounds of the comparison with main.
const (
	// maxPassages bounds the passages compared per preview.
	maxPassages = 4000
	// maxCachedPassages bounds the passages (and rule texts) whose
	// vectors are kept between computations.
	maxCachedPassages = 2 * maxPassages
	// maxExcerpt bounds a passage shown in a preview.
	maxExcerpt = 240
	// maxSimilar bounds the guidance a preview lists.
	maxSimilar = 10
)

// kindOrder is the order guidance is compared in, most relevant first,
// so that the passage cap leaves out what matters least: the agents' own
// rules, then _rules.md files, then base prompts.
var kindOrder = map[string]int{prompts.DocumentRule: 0, prompts.DocumentRulesFile: 1, prompts.DocumentBasePrompt: 2}

// similar compares the rule with each piece of guidance on main: rules
// of the proposal's agents (but its own), every _rules.md file and every
// base prompt, passage by passage, in that order, up to maxPassages;
// leftOut counts the passages the cap left out. A document is listed
// when its closest passage reaches the conflict band of the rules'
// thresholds, and is opposing when that passage gives the opposite
// instruction — the same bands and polarity (english.Polarity) as the
// conflict guard (rules/conflict.go). emb is the Service's
// embedding.Cache, so a recount embeds only the text that changed.
func similar(ctx context.Context, emb embedding.Embedder, th rules.Thresholds, p rulefmt.Proposal, docs []prompts.Document) (_ []Similar, leftOut int, _ error) {
	type compared struct {
		doc      int
		passages []string
	}
	var cs []compared
	for i, d := range docs {
		if d.Kind == prompts.DocumentRule && (!slices.Contains(p.Agents, d.Agent) || d.RuleID == p.RuleID) {
			continue
		}
		cs = append(cs, compared{doc: i})
	}
	slices.SortStableFunc(cs, func(a, b compared) int { return kindOrder[docs[a.doc].Kind] - kindOrder[docs[b.doc].Kind] })
	n := 0
	texts := []string{p.Content}
	for i := range cs {
		c := &cs[i]
		all := passages(docs[c.doc].Text)
		c.passages = all[:min(len(all), maxPassages-n)]
		leftOut += len(all) - len(c.passages)
		n += len(c.passages)
		texts = append(texts, c.passages...)
	}
	if n == 0 {
		return nil, leftOut, nil
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, 0, fmt.Errorf("embed guidance on main: %w", err)
	}
	if len(vecs) != len(texts) {
		return nil, 0, fmt.Errorf("embed guidance on main: got %d vectors for %d texts", len(vecs), len(texts))
	}
	rule, next := vecs[0], vecs[1:]
	best := map[int]Similar{}
	pol := english.Polarity(p.Content)
	for _, c := range cs {
		var cv [][]float32
		cv, next = next[:len(c.passages)], next[len(c.passages):]
		for j, t := range c.passages {
			sim := embedding.Cosine(rule, cv[j])
			if sim < th.Conflict || sim <= best[c.doc].Similarity {
				continue
			}
			d := docs[c.doc]
			best[c.doc] = Similar{Kind: d.Kind, Path: d.Path, RuleID: d.RuleID, Similarity: round3(sim),
				Opposing: pol*english.Polarity(t) < 0, Excerpt: text.Fit(text.OneLine(t), maxExcerpt)}
		}
	}
	out := make([]Similar, 0, len(best))
	for _, s := range best {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Similar) int {
		return cmp.Or(cmp.Compare(b.Similarity, a.Similarity), strings.Compare(a.Path, b.Path))
	})
	return out[:min(len(out), maxSimilar)], leftOut, nil
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
