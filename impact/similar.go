package impact

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/precept-dev/precept/lib/embedding"
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
	// maxCachedPassages bounds the passages whose vectors are kept
	// between computations.
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

// vectorCache keeps the vectors of the passages of documents on main, by
// a hash of the document's text (its content, as a git blob hash is), so
// that a recount embeds only what changed. It is pruned of documents no
// longer on main; Service.computeMu guards it.
type vectorCache struct {
	docs     map[[sha256.Size]byte][][]float32
	passages int
}

// similar compares the rule with each piece of guidance on main: rules
// of the proposal's agents (but its own), every _rules.md file and every
// base prompt, passage by passage, in that order, up to maxPassages;
// leftOut counts the passages the cap left out. A document is listed
// when its closest passage reaches the conflict band of the rules'
// thresholds, and is opposing when that passage gives the opposite
// instruction — the same bands and polarity cues as the conflict guard
// (rules/conflict.go).
func similar(ctx context.Context, emb embedding.Embedder, cache *vectorCache, th rules.Thresholds, p rulefmt.Proposal, docs []prompts.Document) (_ []Similar, leftOut int, _ error) {
	type compared struct {
		doc      int
		key      [sha256.Size]byte
		passages []string
		vecs     [][]float32 // from the cache, or nil
		whole    bool        // every passage of the document is compared
	}
	onMain := map[[sha256.Size]byte]bool{}
	var cs []compared
	for i, d := range docs {
		key := sha256.Sum256([]byte(d.Text))
		onMain[key] = true
		if d.Kind == prompts.DocumentRule && (!slices.Contains(p.Agents, d.Agent) || d.RuleID == p.RuleID) {
			continue
		}
		cs = append(cs, compared{doc: i, key: key})
	}
	cache.prune(onMain)
	slices.SortStableFunc(cs, func(a, b compared) int { return kindOrder[docs[a.doc].Kind] - kindOrder[docs[b.doc].Kind] })
	n := 0
	texts := []string{p.Content}
	for i := range cs {
		c := &cs[i]
		all := passages(docs[c.doc].Text)
		c.passages = all[:min(len(all), maxPassages-n)]
		leftOut += len(all) - len(c.passages)
		n += len(c.passages)
		c.whole = len(c.passages) == len(all)
		if v, ok := cache.docs[c.key]; ok && len(v) >= len(c.passages) {
			c.vecs = v[:len(c.passages)]
			continue
		}
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
	pol := rules.Polarity(p.Content)
	for _, c := range cs {
		if c.vecs == nil {
			c.vecs, next = next[:len(c.passages)], next[len(c.passages):]
			if c.whole {
				cache.put(c.key, c.vecs)
			}
		}
		for j, t := range c.passages {
			sim := embedding.Cosine(rule, c.vecs[j])
			if sim < th.Conflict || sim <= best[c.doc].Similarity {
				continue
			}
			d := docs[c.doc]
			best[c.doc] = Similar{Kind: d.Kind, Path: d.Path, RuleID: d.RuleID, Similarity: round3(sim),
				Opposing: pol*rules.Polarity(t) < 0, Excerpt: text.Fit(text.OneLine(t), maxExcerpt)}
		}
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
	return out[:min(len(out), maxSimilar)], leftOut, nil
}

// prune drops the documents no longer on main.
func (c *vectorCache) prune(onMain map[[sha256.Size]byte]bool) {
	for k, v := range c.docs {
		if !onMain[k] {
			c.passages -= len(v)
			delete(c.docs, k)
		}
	}
}

// put keeps a document's vectors while the cache has room.
func (c *vectorCache) put(key [sha256.Size]byte, vecs [][]float32) {
	if c.passages+len(vecs) > maxCachedPassages {
		return
	}
	if c.docs == nil {
		c.docs = map[[sha256.Size]byte][][]float32{}
	}
	if old, ok := c.docs[key]; ok {
		c.passages -= len(old)
	}
	c.docs[key] = vecs
	c.passages += len(vecs)
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
