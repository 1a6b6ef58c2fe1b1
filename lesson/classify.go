package lesson

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/precept-dev/precept/lib/english"
)

// Unclear is the category of a comment the classifier cannot place: it
// goes to the clarification loop rather than becoming a one-item edge case.
const Unclear = "unclear"

// Input is what the classifier reads of a decision.
type Input struct {
	Comment string
	// Diff is the correction diff; its changed lines and file names are
	// matched against cues only.
	Diff     string
	DiffPath string
	// ScopePath is the path the decision is about; like the diff's file
	// names, it is matched against cues.
	ScopePath       string
	Tags            []string
	ErrorCategories []string
	// Agent is the agent whose output was reviewed: categories that name
	// its kind in Agents lean its way ("review-agent" and the review
	// categories).
	Agent string
}

// Evidence is one thing that decided a classification, for a human to
// check: a cue found in the comment or the diff, the taxonomy phrasing the
// comment reads most like, a tag or error category.
type Evidence struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// Evidence kinds.
const (
	EvidenceCue           = "cue"
	EvidencePhrasing      = "phrasing"
	EvidenceTag           = "tag"
	EvidenceErrorCategory = "error_category"
	EvidenceDiff          = "diff"
	// EvidenceLLM: a model placed the comment (its name is the text).
	EvidenceLLM = "llm"
	// EvidenceWords: the comment's words the category's phrasings use
	// most (the naive Bayes part of the score).
	EvidenceWords = "words"
)

// Match is a category and its score.
type Match struct {
	Category string  `json:"category"`
	Score    float64 `json:"score"`
}

// Result is a classification.
type Result struct {
	// Category is a taxonomy id, or Unclear.
	Category   string     `json:"category"`
	Confidence float64    `json:"confidence"`
	Evidence   []Evidence `json:"evidence,omitempty"`
	// Alternatives are the best-scoring categories, best first (the
	// chosen one included), for curators and the LLM.
	Alternatives []Match `json:"alternatives,omitempty"`
}

// Weights of the signals in a category's score, and the score from which
// a comment is placed (docs/thresholds.md, "Lessons", gives how they
// were chosen).
const (
	weightPhrasing = 0.5
	weightNB       = 1.0
	weightAgent    = 0.5
	weightCue      = 0.8
	weightTag      = 0.45
	weightDiff     = 0.8
	// minScore places a comment in its best category.
	minScore = 0.45
	// maxCueScore caps what cues alone add, so a comment that repeats a
	// key word does not outweigh everything else.
	maxCueScore = 1.5
	// alternatives is how many categories a result lists.
	alternatives = 3
)

// Classifier places comments in a taxonomy's categories. It is built once
// per taxonomy and safe for concurrent use.
type Classifier struct {
	tax   *Taxonomy
	vocab *vocabulary
	idf   map[string]float64
	// postings maps a feature to the phrasings that have it, with its
	// weight there; phrasings index phrasingOf.
	postings map[string][]posting
	// nb is a multinomial naive Bayes model over the same features:
	// per feature, how often each category's phrasings and cues use it.
	nb        nbModel
	phrasings []phrasing
	cues      []cue
	// cuesByTerm maps a cue's rarest term to the cues, to find the
	// candidates quickly.
	cuesByTerm map[string][]int
	tags       map[string][]int
}

type posting struct {
	phrasing int
	weight   float64
}

type phrasing struct {
	category int
	text     string
}

type cue struct {
	category int
	text     string
	terms    []string
	weight   float64
}

// NewClassifier builds the classifier of a taxonomy.
func NewClassifier(t *Taxonomy) *Classifier {
	c := &Classifier{tax: t, vocab: newVocabulary(), postings: map[string][]posting{}, cuesByTerm: map[string][]int{}, tags: map[string][]int{}}
	for _, cat := range t.Categories {
		for _, s := range slices.Concat(cat.Cues, cat.Phrasings) {
			ws := english.Tokens(s, english.Options{ASCIILetters: true})
			for i, w := range ws {
				c.vocab.add(w)
				if i > 0 {
					c.vocab.addPair(ws[i-1], w)
				}
			}
		}
	}
	c.vocab.finish()
	// Each phrasing and cue is read as terms once.
	memo := memoTerms(c.vocab)
	// Document frequencies over phrasings and cues alike.
	df := map[string]int{}
	docs := 0
	for ci, cat := range t.Categories {
		for _, s := range cat.Phrasings {
			c.phrasings = append(c.phrasings, phrasing{category: ci, text: s})
		}
		for _, s := range slices.Concat(cat.Phrasings, cat.Cues) {
			docs++
			for f := range features(memo(s)) {
				df[f]++
			}
		}
	}
	c.idf = make(map[string]float64, len(df))
	for f, n := range df {
		c.idf[f] = math.Log(1 + float64(docs)/float64(n))
	}
	for pi, p := range c.phrasings {
		for f, w := range c.vector(memo(p.text)) {
			c.postings[f] = append(c.postings[f], posting{pi, w})
		}
	}
	c.nb = newNB(t, memo)
	// A cue shared by several categories says less about each.
	owners := map[string]map[int]bool{}
	for ci, cat := range t.Categories {
		for _, s := range cat.Cues {
			ts := memo(s)
			if len(ts) == 0 {
				continue
			}
			key := strings.Join(ts, " ")
			if owners[key] == nil {
				owners[key] = map[int]bool{}
			}
			owners[key][ci] = true
			c.cues = append(c.cues, cue{category: ci, text: s, terms: ts})
		}
		for _, tag := range append([]string{cat.ID}, cat.Tags...) {
			k := normTag(tag)
			if !slices.Contains(c.tags[k], ci) {
				c.tags[k] = append(c.tags[k], ci)
			}
		}
	}
	for i := range c.cues {
		cu := &c.cues[i]
		length := min(0.5+0.25*float64(len(cu.terms)), 1)
		// A one-word cue of a common word ("error") weighs less than a
		// rare one ("flaky").
		if len(cu.terms) == 1 {
			length *= min(1, c.idf[cu.terms[0]]/3)
		}
		cu.weight = length / float64(len(owners[strings.Join(cu.terms, " ")]))
		rare := cu.terms[0]
		for _, t := range cu.terms[1:] {
			if c.idf[t] > c.idf[rare] {
				rare = t
			}
		}
		c.cuesByTerm[rare] = append(c.cuesByTerm[rare], i)
	}
	return c
}

// Taxonomy is the taxonomy the classifier was built from.
func (c *Classifier) Taxonomy() *Taxonomy { return c.tax }

// memoTerms returns terms with v, remembering each text's.
func memoTerms(v *vocabulary) func(string) []string {
	seen := map[string][]string{}
	return func(s string) []string {
		ts, ok := seen[s]
		if !ok {
			ts = terms(s, v)
			seen[s] = ts
		}
		return ts
	}
}

// features are a text's terms and its neighbouring pairs of terms.
func features(ts []string) map[string]int {
	f := make(map[string]int, 2*len(ts))
	for i, t := range ts {
		f[t]++
		if i > 0 {
			f[ts[i-1]+" "+t]++
		}
	}
	return f
}

// vector weighs a text's features by sublinear frequency and inverse
// document frequency, normalised to unit length. Features the taxonomy
// never uses are left out: they cannot match anything.
func (c *Classifier) vector(ts []string) map[string]float64 {
	fs := features(ts)
	v := make(map[string]float64, len(fs))
	var norm float64
	// Features in a fixed order, so every replica adds the same floats in
	// the same order.
	for _, f := range slices.Sorted(maps.Keys(fs)) {
		n := fs[f]
		idf, ok := c.idf[f]
		if !ok {
			continue
		}
		w := (1 + math.Log(float64(n))) * idf
		v[f] = w
		norm += w * w
	}
	if norm == 0 {
		return nil
	}
	norm = math.Sqrt(norm)
	for f := range v {
		v[f] /= norm
	}
	return v
}

// Classify places a comment (with its diff, tags and error categories) in
// a category, or says it is Unclear.
func (c *Classifier) Classify(in Input) Result { return c.classify(in, -1) }

// classify is Classify as if phrasing exclude (when not -1) were not in
// the taxonomy: leave-one-out measurement of the phrasings.
func (c *Classifier) classify(in Input, exclude int) Result {
	n := len(c.tax.Categories)
	scores, evidence := c.score(in, exclude)
	r := c.decide(scores, evidence, n)
	if ci, ok := c.tax.byID[r.Category]; ok {
		if words := c.nb.telling(in.Comment, ci, c.vocab); words != "" {
			r.Evidence = append(r.Evidence, Evidence{EvidenceWords, words})
		}
	}
	return r
}

func (c *Classifier) score(in Input, exclude int) ([]float64, [][]Evidence) {
	n := len(c.tax.Categories)
	scores := make([]float64, n)
	evidence := make([][]Evidence, n)
	ts := terms(withoutReviewerState(in.Comment), c.vocab)

	// The phrasing the comment reads most like, per category.
	sc := dotPool.Get().(*dotScratch)
	defer dotPool.Put(sc)
	sc.start(len(c.phrasings))
	vec := c.vector(ts)
	for _, f := range slices.Sorted(maps.Keys(vec)) {
		w := vec[f]
		for _, p := range c.postings[f] {
			sc.add(p.phrasing, w*p.weight)
		}
	}
	best := make([]int, n)
	phr := make([]float64, n)
	for i := range best {
		best[i] = -1
	}
	for _, pi := range sc.touched {
		d := sc.dots[pi]
		if pi == exclude {
			continue
		}
		ci := c.phrasings[pi].category
		if d > phr[ci] || (d == phr[ci] && pi < best[ci]) {
			phr[ci], best[ci] = d, pi
		}
	}
	var drop map[string]int
	if exclude >= 0 {
		drop = features(terms(c.phrasings[exclude].text, c.vocab))
	}
	nb := c.nb.posterior(features(ts), c.phrasings[max(exclude, 0)].category, drop)
	for ci := range n {
		scores[ci] += weightNB * nb[ci]
		if best[ci] >= 0 {
			scores[ci] += weightPhrasing * phr[ci]
			if phr[ci] >= 0.3 {
				evidence[ci] = append(evidence[ci], Evidence{EvidencePhrasing, c.phrasings[best[ci]].text})
			}
		}
	}

	c.matchCues(ts, weightCue, EvidenceCue, newSenseCheck(ts, nb), scores, evidence)
	if strings.TrimSpace(in.Diff) != "" || in.DiffPath != "" || in.ScopePath != "" {
		c.matchCues(terms(diffText(in.Diff, in.DiffPath+" "+in.ScopePath), c.vocab), weightDiff, EvidenceDiff, senseCheck{}, scores, evidence)
	}
	if agent := strings.ToLower(in.Agent); agent != "" && weightAgent > 0 {
		// A lean, not evidence: it scales what the comment says, so a
		// vague comment stays unclear whoever wrote it.
		for ci, cat := range c.tax.Categories {
			for _, kind := range cat.Agents {
				if strings.Contains(agent, kind) {
					scores[ci] *= 1 + weightAgent
					break
				}
			}
		}
	}
	for _, labels := range []struct {
		kind string
		list []string
	}{{EvidenceTag, in.Tags}, {EvidenceErrorCategory, in.ErrorCategories}} {
		kind := labels.kind
		for _, tag := range labels.list {
			cats := c.tags[normTag(tag)]
			for _, ci := range cats {
				scores[ci] += weightTag / float64(len(cats))
				evidence[ci] = append(evidence[ci], Evidence{kind, tag})
			}
		}
	}

	return scores, evidence
}

// decide places a comment by its categories' scores.
func (c *Classifier) decide(scores []float64, evidence [][]Evidence, n int) Result {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	var r Result
	for _, ci := range order[:min(alternatives, n)] {
		if scores[ci] > 0 {
			r.Alternatives = append(r.Alternatives, Match{c.tax.Categories[ci].ID, round3(scores[ci])})
		}
	}
	top := order[0]
	if scores[top] < minScore {
		r.Category, r.Confidence = Unclear, round3(1-scores[top]/minScore*0.5)
		return r
	}
	second := 0.0
	if n > 1 {
		second = scores[order[1]]
	}
	r.Category = c.tax.Categories[top].ID
	r.Evidence = evidence[top]
	// Confidence grows with the score and with the margin over the next
	// category.
	r.Confidence = round3(math.Min(0.99, 0.5*math.Min(scores[top], 1)+0.5*(1-second/scores[top])))
	return r
}

// matchCues adds the score of every cue whose terms all occur in ts
// within a window a little longer than the cue, weighed by sense.
func (c *Classifier) matchCues(ts []string, weight float64, kind string, sense senseCheck, scores []float64, evidence [][]Evidence) {
	if len(ts) == 0 {
		return
	}
	pos := map[string][]int{}
	for i, t := range ts {
		pos[t] = append(pos[t], i)
	}
	added := map[int]float64{}
	// Terms in the order of the text, not of the map: which cues count
	// under the cap, the order of the evidence and the float sums are
	// then the same on every run and every replica.
	for j, t := range ts {
		if pos[t][0] != j {
			continue
		}
		for _, i := range c.cuesByTerm[t] {
			cu := c.cues[i]
			if !cueAt(cu.terms, pos) || !negationBinds(cu.terms, pos) || added[cu.category] >= maxCueScore {
				continue
			}
			w := min(cu.weight*sense.factor(c, cu), maxCueScore-added[cu.category])
			added[cu.category] += w
			scores[cu.category] += weight * w
			evidence[cu.category] = append(evidence[cu.category], Evidence{kind, cu.text})
		}
	}
}

// cueAt reports whether every term of a cue occurs within a window of
// len(cue)+3 terms.
func cueAt(cue []string, pos map[string][]int) bool {
	for _, t := range cue {
		if len(pos[t]) == 0 {
			return false
		}
	}
	if len(cue) == 1 {
		return true
	}
	window := len(cue) + 3
	for _, start := range pos[cue[0]] {
		ok := true
		for _, t := range cue[1:] {
			if !slices.ContainsFunc(pos[t], func(p int) bool { return p >= start-window && p <= start+window }) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// diffText is what the classifier reads of a correction diff: the lines
// it adds and removes and the files it touches.
func diffText(diff, path string) string {
	var b strings.Builder
	b.WriteString(path)
	for line := range strings.Lines(diff) {
		switch {
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
			b.WriteString(" " + strings.TrimSpace(line[4:]))
		case strings.HasPrefix(line, "+"), strings.HasPrefix(line, "-"):
			b.WriteString(" " + strings.TrimSpace(line[1:]))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// nbModel is multinomial naive Bayes with additive smoothing.
type nbModel struct {
	// counts maps a feature to the categories that use it and how often.
	counts map[string][]nbCount
	totals []float64
	vocab  float64
	// pool counts each feature over all categories: the language of
	// reviews in general, against which a category's words must stand
	// out.
	pool      map[string]float64
	poolTotal float64
	// poolLog is each feature's log probability in the pool.
	poolLog map[string]float64
}

type nbCount struct {
	category int
	n        float64
	// logN is log(n + nbAlpha).
	logN float64
}

// nbAlpha is the additive smoothing of the model.
const nbAlpha = 0.3

// nbStandOut is how many nats a text's words must speak more for a
// category than for reviews in general before the model's vote for it
// counts in full.
const nbStandOut = 2.0

func newNB(t *Taxonomy, memo func(string) []string) nbModel {
	m := nbModel{counts: map[string][]nbCount{}, totals: make([]float64, len(t.Categories))}
	byCat := make([]map[string]float64, len(t.Categories))
	for ci, cat := range t.Categories {
		byCat[ci] = map[string]float64{}
		for _, s := range slices.Concat(cat.Phrasings, cat.Cues) {
			for f, k := range features(memo(s)) {
				byCat[ci][f] += float64(k)
				m.totals[ci] += float64(k)
			}
		}
	}
	m.pool = map[string]float64{}
	for ci, fs := range byCat {
		for f, k := range fs {
			m.counts[f] = append(m.counts[f], nbCount{ci, k, math.Log(k + nbAlpha)})
			m.pool[f] += k
			m.poolTotal += k
		}
	}
	m.vocab = float64(len(m.counts))
	m.poolLog = make(map[string]float64, len(m.pool))
	for f, p := range m.pool {
		m.poolLog[f] = math.Log((p + nbAlpha) / (m.poolTotal + nbAlpha*m.vocab))
	}
	return m
}

// posterior returns each category's probability given a text's
// features, under a uniform prior, discounted by how far the text's
// words stand out from reviews in general: a comment of common words
// ("not sure about this") gets little whichever category wins.
// Features no category uses are left out. drop (counts of category
// dropCat) is left out of the model, for leave-one-out measurement.
func (m nbModel) posterior(fs map[string]int, dropCat int, drop map[string]int) []float64 {
	n := len(m.totals)
	logp := make([]float64, n)
	logDen := make([]float64, n)
	for ci, t := range m.totals {
		if drop != nil && ci == dropCat {
			for _, k := range drop {
				t -= float64(k)
			}
		}
		logDen[ci] = math.Log(t + nbAlpha*m.vocab)
	}
	logAlpha := math.Log(nbAlpha)
	// Features in a fixed order, so every replica adds the same floats in
	// the same order.
	keys := make([]string, 0, len(fs))
	for f := range fs {
		if _, ok := m.counts[f]; ok {
			keys = append(keys, f)
		}
	}
	slices.Sort(keys)
	// standOut is what speaks for each category: the features it uses
	// more than reviews in general do, in nats.
	standOut := make([]float64, n)
	var total float64
	for _, f := range keys {
		kf := float64(fs[f])
		total += kf
		for _, c := range m.counts[f] {
			logN := c.logN
			if drop != nil && c.category == dropCat {
				logN = math.Log(c.n - float64(drop[f]) + nbAlpha)
			}
			logp[c.category] += kf * (logN - logAlpha)
			if f == negation {
				// A negation alone names no problem.
				continue
			}
			if lr := logN - logDen[c.category] - m.poolLog[f]; lr > 0 {
				standOut[c.category] += kf * lr
			}
		}
	}
	for ci := range n {
		logp[ci] += total * (logAlpha - logDen[ci])
	}
	mx := slices.Max(logp)
	var z float64
	for ci := range n {
		logp[ci] = math.Exp(logp[ci] - mx)
		z += logp[ci]
	}
	for ci := range n {
		logp[ci] /= z
		// The evidence for the category in nats, against the pool.
		logp[ci] *= min(1, standOut[ci]/nbStandOut)
	}
	return logp
}

// maxTelling is how many words the words evidence lists.
const maxTelling = 4

// telling returns the comment's words that speak most for category ci:
// those its phrasings use most often relative to the others.
func (m nbModel) telling(comment string, ci int, v *vocabulary) string {
	type word struct {
		text string
		lift float64
	}
	var ws []word
	seen := map[string]bool{}
	for _, w := range codeWords(comment) {
		ts := terms(w.Text, v)
		if len(ts) != 1 || seen[ts[0]] {
			continue
		}
		seen[ts[0]] = true
		var mine, all float64
		for _, c := range m.counts[ts[0]] {
			all += c.n
			if c.category == ci {
				mine = c.n
			}
		}
		if mine == 0 {
			continue
		}
		// The share of the word's uses that are this category's, against
		// the category's share of all words.
		ws = append(ws, word{w.Text, mine / all})
	}
	slices.SortStableFunc(ws, func(a, b word) int { return cmp.Compare(b.lift, a.lift) })
	var out []string
	for _, w := range ws[:min(len(ws), maxTelling)] {
		if w.lift >= 0.2 {
			out = append(out, w.text)
		}
	}
	return strings.Join(out, ", ")
}
