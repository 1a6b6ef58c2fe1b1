package embedding

import (
	"fmt"
	"slices"
)

// maxPhraseWords bounds the length of a concept phrase in words.
const maxPhraseWords = 4

// Lookup tables built once from the readable lists in lexicon.go and
// concepts.go.
var (
	stopSet = map[string]struct{}{}
	// termWeights maps a normalised word's key to its weight.
	termWeights = map[uint64]float64{}
	// phraseConcepts maps the hash of a phrase's word keys to the concepts
	// it expresses, as indexes into concepts.
	phraseConcepts = map[uint64][]int{}
	// wordConcepts maps the folded hash of each single-word phrase of at
	// least minTypoWord-1 letters to its concepts; deletedConcepts maps
	// the hashes of single-word phrases of at least minTypoWord+1 letters
	// with one inner letter deleted. typoConcepts uses both.
	wordConcepts    = map[uint64][]int{}
	deletedConcepts = map[uint64][]int{}
)

func init() {
	for _, w := range stopWords {
		stopSet[w] = struct{}{}
	}
	for _, list := range []struct {
		words  []string
		weight float64
	}{{fillerWords, fillerWeight}, {commonWords, commonWeight}} {
		for _, w := range list.words {
			termWeights[normaliseWord([]byte(w)).key] = list.weight
		}
	}
	for id, c := range concepts {
		for _, p := range c.phrases {
			h, n := phraseKey(p)
			if n == 0 || n > maxPhraseWords {
				panic(fmt.Sprintf("embedding: concept %q: phrase %q has %d words, want 1..%d", c.name, p, n, maxPhraseWords))
			}
			addID(phraseConcepts, h, id)
			if n == 1 {
				addTypoForms(p, id)
			}
		}
	}
}

// phraseKey normalises a phrase the way texts are normalised and returns
// the hash matchConcepts computes for the same words, and the word count.
func phraseKey(p string) (uint64, int) {
	buf, spans := tokenize(p, nil, nil)
	h := uint64(0)
	for _, sp := range spans {
		h = combine(h, normaliseWord(buf[sp.start:sp.end]).ckey)
	}
	return h, len(spans)
}

func addID(m map[uint64][]int, h uint64, id int) {
	if !slices.Contains(m[h], id) {
		m[h] = append(m[h], id)
	}
}

// addTypoForms indexes a single-word phrase for typoConcepts.
func addTypoForms(phrase string, id int) {
	buf, spans := tokenize(phrase, nil, nil)
	w := buf[spans[0].start:spans[0].end]
	for _, c := range w {
		if c < 'a' || c > 'z' {
			return
		}
	}
	f := appendFolded(nil, w)
	if len(f) >= minTypoWord-1 {
		addID(wordConcepts, hashBytes(f), id)
	}
	if len(f) >= minTypoWord+1 {
		for p := 1; p < len(f)-1; p++ {
			d := append(append([]byte(nil), f[:p]...), f[p+1:]...)
			addID(deletedConcepts, hashBytes(d), id)
		}
	}
}
