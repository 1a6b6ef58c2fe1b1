// Package english is precept's one toolkit for reading English text:
// splitting it into words (Words, Tokens, AppendWords), stemming (Stem),
// negation (IsNegation, Negations), whether an instruction prescribes or
// forbids (Polarity), and the stop-word lists callers build their sets
// from (Snowball, Contractions, FunctionWords, Chatter; StopSet,
// Set.Without).
//
// The local embedder, the lesson classifier, the clarity rubric and the
// rules' quality gate all read reviewer feedback and rule text. They used
// to do so with four tokenisers of their own, three stop-word lists, a
// list of negations and a polarity function. Here they share one
// implementation and one test table (english_test.go); where a caller
// genuinely reads differently it says so with Options (Code for the
// embedder and the classifier, Keep for the rubric's and the gate's
// apostrophes and hyphens, ASCIILetters for the classifier's vocabulary)
// or with the lists it takes and leaves out, not with a copy.
//
// It is a package of its own rather than part of lib/text because it
// links the Snowball stemmer and carries word tables, while lib/text is
// small, dependency-free and linked into the command-line client, which
// reads no English. It imports no precept package (layer 0);
// lib/embedding builds on it.
package english
