package embedding

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/precept-dev/precept/lib/english"
)

// localVersion names the algorithm and its built-in tables. Bump it with
// any change that changes vectors (weights, tables, tokenizer, hashing):
// the index re-embeds everything when Name changes.
// TestLocalGoldenVectorPinsLocalVersion fails when vectors change and the
// version did not.
const localVersion = "v1"

// Dimension bounds and default of Local. Concepts take one dimension
// each and words are hashed into the rest, so dimension matters little:
// on testdata/feedback every candidate from 256 to 1024 clusters within
// about a point of F1 of the others, and the default is the smallest
// (TestDefaultDimensionIsWithinAPointOfTheBest keeps it honest). Vector
// search cost grows linearly with it.
const (
	DefaultLocalDimension = 256
	MinLocalDimension     = 256
	MaxLocalDimension     = 8192
)

// MaxInputBytes is how much of each text Local reads: reviewer feedback
// that says something useful says it well before 8 KiB, and the cap
// bounds the work any one text can cause.
const MaxInputBytes = 8 << 10

// Block weights: the share each kind of feature has in a vector's content
// (before calibration). Each block is normalised on its own before it is
// weighted, so two texts that share every concept but no word still reach
// a content cosine of about weightConcept. Concepts dominate because they
// carry meaning across wording; words and bigrams separate comments with
// the same concepts and carry comments the concept table does not cover;
// character n-grams tolerate typos and morphology the stemmer misses.
// Measured on testdata/feedback: F1 is flat within a point or two for
// concept shares from 0.75 to 0.9.
const (
	weightConcept = 0.85
	weightUnigram = 0.075
	weightBigram  = 0.025
	weightChar    = 0.05
)

// calibration is the share of a constant component in every non-empty
// vector. It turns the cosine c of two texts' content into
// calibration + (1-calibration)*c, keeping the order of neighbours. The
// content alone puts paraphrases of one complaint mostly between 0.5 and
// 0.8 and unrelated complaints near 0; precept clusters at 0.8 by default
// (docs/thresholds.md). With this share the default threshold falls where
// clustering F1 on testdata/feedback peaks (content cosine 0.56), and
// unrelated complaints land near 0.55.
const calibration = 0.55

// fullConcepts is the concept mass at which the concept block gets its
// whole share: an aspect and a topic ("missing" + "tests"). A comment that
// names only a topic or a broad concept says less about what is wrong, so
// its concept block shrinks in proportion and its words get more say.
const fullConcepts = aspect + topic

// Character n-gram sizes, within one word padded with boundary marks.
const (
	minGram = 3
	maxGram = 5
	// maxGramWord skips n-grams of longer tokens (hashes, base64,
	// minified code): they are noise, and expensive.
	maxGramWord = 24
	// maxStemWord skips stemming of longer tokens for the same reason.
	maxStemWord = 32
)

// LocalOptions configures Local. The zero value means the defaults.
type LocalOptions struct {
	// Dimension is the vector length; 0 means DefaultLocalDimension.
	// NewLocal clamps other values to [MinLocalDimension,
	// MaxLocalDimension]; Validate reports them.
	Dimension int
}

// Validate reports a dimension outside the supported range, so
// configuration can be rejected at start rather than silently clamped.
func (o LocalOptions) Validate() error {
	if o.Dimension != 0 && (o.Dimension < MinLocalDimension || o.Dimension > MaxLocalDimension) {
		return fmt.Errorf("validate local embedder options: dimension %d outside [%d, %d]",
			o.Dimension, MinLocalDimension, MaxLocalDimension)
	}
	return nil
}

// Local is the deterministic, download-free default Embedder. It gives each
// software-review concept a dimension of its own, adds the calibration
// constant, and hashes stemmed words, word bigrams and character n-grams
// into the remaining dimensions with pseudo-random signs. It is safe for
// concurrent use.
type Local struct {
	dim  int
	name string
}

var _ Embedder = (*Local)(nil)

// NewLocal returns a Local embedder. A zero Dimension means
// DefaultLocalDimension; others are clamped to the supported range.
func NewLocal(opts LocalOptions) *Local {
	dim := opts.Dimension
	if dim == 0 {
		dim = DefaultLocalDimension
	}
	dim = max(MinLocalDimension, min(MaxLocalDimension, dim))
	return &Local{dim: dim, name: fmt.Sprintf("local-ngram-%s-%d", localVersion, dim)}
}

// Name identifies the algorithm version and dimension, e.g.
// "local-ngram-v1-256".
func (l *Local) Name() string { return l.name }

// Dimension returns the length of the vectors Embed returns.
func (l *Local) Dimension() int { return l.dim }

// Embed returns one L2-normalised vector per text, reading at most
// MaxInputBytes of each. A text in which nothing counts (empty, only
// punctuation or single letters) yields the zero vector. Embed fails only
// when ctx is done.
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embed texts: %w", err)
		}
		out[i] = l.embed(sc, t)
	}
	return out, nil
}

// word is one token of a text after normalisation.
type word struct {
	surface []byte  // lower-cased as written, aliasing scratch.buf
	key     uint64  // hash of the normalised form: the stem for English words
	ckey    uint64  // hash of the form concept phrases match: plurals folded
	weight  float64 // 0 for stop words
	// ident marks part of an identifier: "TestDelete" and "db.Close()"
	// are code, not requests to delete or close something, so their parts
	// take part in concept phrases ("WaitGroup") but name no concept on
	// their own.
	ident bool
}

// scratch holds the buffers one embedding needs, reused across calls.
type scratch struct {
	buf   []byte
	spans []span
	words []word
	feats [numBlocks][]feature
	gram  []byte
	runes []int
	acc   []float64
	stems map[string]word // normalised words by surface; surface unset
}

// feature is one feature occurrence: its hash (in the concept block, the
// concept's index) and its weight.
type feature struct {
	h uint64
	w float64
}

const (
	blockConcept = iota
	blockUnigram
	blockBigram
	blockChar
	numBlocks
)

var blockWeights = [numBlocks]float64{weightConcept, weightUnigram, weightBigram, weightChar}

// calibrationDim is the dimension that holds the constant component:
// concepts own the dimensions before it, one each, so no two concepts
// ever collide; words and n-grams are hashed into those after it.
var calibrationDim = len(concepts)

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// embed computes the vector of one text.
func (l *Local) embed(sc *scratch, text string) []float32 {
	if len(text) > MaxInputBytes {
		// A rune cut in half becomes an invalid byte: a separator.
		text = text[:MaxInputBytes]
	}
	sc.buf, sc.spans = tokenize(text, sc.buf[:0], sc.spans[:0])
	sc.words = sc.words[:0]
	for _, sp := range sc.spans {
		w := sc.normalise(sc.buf[sp.start:sp.end])
		w.ident = sp.ident
		sc.words = append(sc.words, w)
	}
	for b := range sc.feats {
		sc.feats[b] = sc.feats[b][:0]
	}
	sc.matchConcepts()
	prev := -1
	for i, w := range sc.words {
		if w.weight == 0 {
			continue
		}
		sc.feats[blockUnigram] = append(sc.feats[blockUnigram], feature{mix(w.key ^ seedUnigram), w.weight})
		if prev >= 0 {
			p := sc.words[prev]
			sc.feats[blockBigram] = append(sc.feats[blockBigram],
				feature{combine(p.key^seedBigram, w.key), math.Sqrt(p.weight * w.weight)})
		}
		prev = i
		sc.addCharGrams(w)
	}

	if cap(sc.acc) < l.dim {
		sc.acc = make([]float64, l.dim)
	}
	acc := sc.acc[:l.dim]
	clear(acc)
	addConcepts(acc[:calibrationDim], sc.feats[blockConcept], blockWeights[blockConcept])
	for b := blockUnigram; b < numBlocks; b++ {
		addBlock(acc[calibrationDim+1:], sc.feats[b], blockWeights[b])
	}
	var norm float64
	for _, x := range acc {
		norm += float64(x * x)
	}
	out := make([]float32, l.dim)
	if norm == 0 {
		return out
	}
	scale := math.Sqrt(1-calibration) / math.Sqrt(norm)
	for i, x := range acc {
		out[i] = float32(x * scale)
	}
	out[calibrationDim] = float32(math.Sqrt(calibration))
	return out
}

// maxStemCache bounds the stems a scratch remembers; it is emptied when
// full.
const maxStemCache = 4096

// normalise is normaliseWord with the stems of words seen before taken
// from the scratch's cache: stemming is the costliest step, and feedback
// repeats its vocabulary.
func (sc *scratch) normalise(b []byte) word {
	if sc.stems == nil || len(sc.stems) >= maxStemCache {
		sc.stems = make(map[string]word, 256)
	}
	if w, ok := sc.stems[string(b)]; ok {
		w.surface = b
		return w
	}
	w := normaliseWord(b)
	w.surface = nil // the cache must not keep the buffer alive
	sc.stems[string(b)] = w
	w.surface = b
	return w
}

// normaliseWord classifies a lower-cased token and computes its keys and
// weight.
func normaliseWord(b []byte) word {
	w := word{surface: b, ckey: foldKey(b), weight: 1}
	if _, ok := stopSet[string(b)]; ok {
		w.key = hashBytes(b)
		w.weight = 0
		return w
	}
	ascii, letters, digits := true, true, true
	for _, c := range b {
		switch {
		case c >= utf8.RuneSelf:
			ascii, letters, digits = false, false, false
		case c >= 'a' && c <= 'z':
			digits = false
		case c >= '0' && c <= '9':
			letters = false
		}
	}
	switch {
	case digits:
		w.key = hashBytes(b)
		w.weight = numberWeight
		return w
	case ascii && len(b) == 1:
		// Single letters are variable names and list markers.
		w.key = hashBytes(b)
		w.weight = 0
		return w
	case letters && len(b) >= 3 && len(b) <= maxStemWord:
		w.key = hashString(english.Stem(string(b)))
	default:
		w.key = hashBytes(b)
	}
	if tw, ok := termWeights[w.key]; ok {
		w.weight = tw
	}
	return w
}

// matchConcepts matches concept phrases over all words, stop words
// included, longest phrase first, and records a feature per concept named.
func (sc *scratch) matchConcepts() {
	words := sc.words
	for i := 0; i < len(words); {
		var hs [maxPhraseWords]uint64
		n := min(maxPhraseWords, len(words)-i)
		h := uint64(0)
		for j := range n {
			h = combine(h, words[i+j].ckey)
			hs[j] = h
		}
		matched, before := 0, len(sc.feats[blockConcept])
		for j := n - 1; j >= 0; j-- {
			if ids, ok := phraseConcepts[hs[j]]; ok {
				sc.addConceptIDs(ids)
				matched = j + 1
				break
			}
		}
		if matched == 1 && words[i].ident {
			// A lone identifier part names no concept; drop the match.
			sc.feats[blockConcept] = sc.feats[blockConcept][:before]
		}
		if matched == 0 && words[i].weight > 0 && !words[i].ident {
			sc.addConceptIDs(sc.typoConcepts(words[i].surface))
		}
		i += max(1, matched)
	}
}

// addConceptIDs records one feature for each of the concepts ids.
func (sc *scratch) addConceptIDs(ids []int) {
	for _, id := range ids {
		sc.feats[blockConcept] = append(sc.feats[blockConcept], feature{uint64(id), concepts[id].weight})
	}
}

// Typo tolerance for concept words: a word of at least minTypoWord letters
// that matches no phrase may still be a one-letter slip of a single-word
// phrase, a letter too many ("tesst") or too few ("loging"). The first and
// last letters must be right, since changing those makes other words:
// "sprint" is not a misspelt "print", nor "Stripe" a misspelt "strip".
const (
	minTypoWord = 5
	maxTypoWord = 20
)

// typoConcepts returns the concepts of the single-word phrase that word
// (lower-cased) is one letter away from, or nil.
func (sc *scratch) typoConcepts(word []byte) []int {
	if len(word) < minTypoWord || len(word) > maxTypoWord {
		return nil
	}
	for _, c := range word {
		if c < 'a' || c > 'z' {
			return nil
		}
	}
	sc.gram = appendFolded(sc.gram[:0], word)
	f := sc.gram
	if len(f) < minTypoWord {
		return nil
	}
	// A letter too few: the word is a phrase with one letter deleted.
	if ids, ok := deletedConcepts[hashBytes(f)]; ok {
		return ids
	}
	// A letter too many: deleting one of the word's letters gives a phrase.
	prefix := hashBytes(f[:1])
	for p := 1; p < len(f)-1; p++ {
		h := prefix
		for _, c := range f[p+1:] {
			h ^= uint64(c)
			h *= fnvPrime
		}
		if ids, ok := wordConcepts[h]; ok {
			return ids
		}
		prefix ^= uint64(f[p])
		prefix *= fnvPrime
	}
	return nil
}

// addCharGrams records the character n-grams of one word, padded with
// boundary marks. Each word's n-grams share its weight, so long words do
// not outweigh short ones.
func (sc *scratch) addCharGrams(w word) {
	if len(w.surface) > maxGramWord {
		return
	}
	sc.gram = append(append(append(sc.gram[:0], '<'), w.surface...), '>')
	sc.runes = sc.runes[:0]
	for i := range string(sc.gram) {
		sc.runes = append(sc.runes, i)
	}
	sc.runes = append(sc.runes, len(sc.gram))
	nr := len(sc.runes) - 1
	count := 0
	for n := minGram; n <= maxGram; n++ {
		count += max(0, nr-n+1)
	}
	if count == 0 {
		return
	}
	gw := w.weight / math.Sqrt(float64(count))
	for n := minGram; n <= maxGram; n++ {
		for s := 0; s+n <= nr; s++ {
			g := sc.gram[sc.runes[s]:sc.runes[s+n]]
			sc.feats[blockChar] = append(sc.feats[blockChar], feature{mix(hashBytes(g) ^ seedChar), gw})
		}
	}
}

// addBlock folds one block of hashed features into acc: repeated features
// are merged with sublinear term frequency, the block is normalised and
// scaled by sqrt(share) so its contribution to a cosine is share times
// the block's own cosine. Features are summed in hash order, so the
// floating-point result does not depend on map or input order.
func addBlock(acc []float64, feats []feature, share float64) {
	if len(feats) == 0 {
		return
	}
	slices.SortFunc(feats, func(a, b feature) int { return cmp.Compare(a.h, b.h) })
	// Merge runs in place: each run becomes its largest weight times the
	// sublinear frequency of the run.
	merged := feats[:0]
	var norm float64
	for i := 0; i < len(feats); {
		j, w := i+1, feats[i].w
		for j < len(feats) && feats[j].h == feats[i].h {
			w = max(w, feats[j].w)
			j++
		}
		v := w * sublinearTF(j-i)
		merged = append(merged, feature{feats[i].h, v})
		norm += float64(v * v)
		i = j
	}
	if norm == 0 {
		return
	}
	scale := math.Sqrt(share) / math.Sqrt(norm)
	dim := uint64(len(acc))
	for _, f := range merged {
		v := float64(f.w * scale)
		if f.h>>63 == 1 {
			v = -v
		}
		acc[f.h%dim] += v
	}
}

// addConcepts folds the matched concepts into acc, one dimension per
// concept. A concept counts once however often a comment names it:
// repeating the topic ("tests ... test ... tested") must not drown the
// aspect that says what is wrong with it.
func addConcepts(acc []float64, feats []feature, share float64) {
	if len(feats) == 0 {
		return
	}
	// Sorting by concept index fixes the summation order.
	slices.SortFunc(feats, func(a, b feature) int { return cmp.Compare(a.h, b.h) })
	feats = slices.CompactFunc(feats, func(a, b feature) bool { return a.h == b.h })
	var norm float64
	for _, f := range feats {
		norm += float64(f.w * f.w)
	}
	norm = math.Sqrt(norm)
	scale := math.Sqrt(share) * min(1, norm/fullConcepts) / norm
	for _, f := range feats {
		acc[f.h] += float64(f.w * scale)
	}
}

// tfTable holds 1 + ln(n) for n = 1..32 as literals: math.Log has
// platform-specific implementations, and vectors must not.
var tfTable = [...]float64{
	1.000000, 1.693147, 2.098612, 2.386294, 2.609438, 2.791759, 2.945910, 3.079442,
	3.197225, 3.302585, 3.397895, 3.484907, 3.564949, 3.639057, 3.708050, 3.772589,
	3.833213, 3.890372, 3.944439, 3.995732, 4.044522, 4.091042, 4.135494, 4.178054,
	4.218876, 4.258097, 4.295837, 4.332205, 4.367296, 4.401197, 4.433987, 4.465736,
}

// sublinearTF is 1 + ln(n), capped at n = 32: a feature repeated more
// often than that in one comment is noise, not emphasis.
func sublinearTF(n int) float64 {
	return tfTable[min(n, len(tfTable))-1]
}

// foldKey hashes a lower-cased word with its English plural folded, the
// form concept phrases are matched on.
func foldKey(b []byte) uint64 {
	var buf [32]byte
	return hashBytes(appendFolded(buf[:0], b))
}

// appendFolded appends the lower-cased word b with its English plural
// folded: "tests" becomes "test", "retries" "retry". Words ending in "ss",
// "us" or "is" are left alone ("class", "status", "analysis"), as are
// words shorter than four bytes.
func appendFolded(dst, b []byte) []byte {
	n := len(b)
	switch {
	case n < 4 || b[n-1] != 's':
		return append(dst, b...)
	case b[n-3] == 'i' && b[n-2] == 'e':
		return append(append(dst, b[:n-3]...), 'y')
	case b[n-2] == 's' || b[n-2] == 'u' || b[n-2] == 'i':
		return append(dst, b...)
	}
	return append(dst, b[:n-1]...)
}
