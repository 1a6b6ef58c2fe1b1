// Package english is precept's one toolkit for reading English text:
// splitting it into words (Words, Tokens, AppendWords, with Options for
// what callers genuinely read differently), stemming (Stem), negation
// (IsNegation), whether an instruction prescribes or forbids (Polarity),
// and the stop-word lists callers build their sets from (StopSet).
//
// The local embedder, the lesson classifier, the clarity rubric and the
// rules' quality gate all read reviewer feedback and rule text; they used
// to do so with four tokenisers of their own, two stop-word lists and a
// polarity function each. Here they share one implementation and one
// test table (english_test.go), and a caller's difference is an option
// it names, not a copy.
//
// It is a package of its own rather than part of lib/text because it
// links the Snowball stemmer and carries word tables, while lib/text is
// small, dependency-free and linked into the command-line client, which
// reads no English. Like every lib/ package it imports no precept
// package (layer 0).
package english
