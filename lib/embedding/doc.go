// Package embedding turns reviewer feedback into vectors for similarity search.
//
// An Embedder maps texts to L2-normalised vectors, so the cosine similarity
// of two vectors is their dot product. precept clusters feedback whose
// cosine reaches a threshold (0.8 by default, docs/thresholds.md), so an
// embedder is judged by whether two paraphrases of the same complaint land
// above that threshold and unrelated complaints well below it.
//
// Local is the default embedder: it needs no model download, runs in
// process in microseconds per comment, and gives the same
// vector for the same text on every machine. A vector has three parts:
//
//   - software-review concepts (concepts.go), one dimension each: "no unit
//     tests" and "coverage is missing" share the concepts testing and
//     missing although they share no word;
//   - a constant that calibrates cosines to the 0.8 threshold;
//   - hashed lexical features: stemmed words weighted by a built-in
//     stand-in for inverse document frequency (lexicon.go), word bigrams,
//     and character 3-5-grams that tolerate typos.
//
// Its quality is measured by the tests in this package against the
// labelled feedback in testdata/feedback. The concept table is its model:
// feedback about issues the table knows clusters well (pairwise F1 about
// 0.8 at the default threshold), feedback about issues it does not know
// falls back to shared words and clusters poorly. Deployments whose
// feedback strays from common software-review topics should configure an
// embedding model instead.
package embedding
