// Package lesson reduces a reviewer's decision to a lesson: a category
// from a taxonomy of what reviewers flag, the problem and the desired
// behaviour in the taxonomy's canonical words, and the evidence that
// decided it. Clustering, the clarity rubric and rule drafting work on
// lessons rather than on raw comment strings (docs/lessons.md).
//
// The taxonomy is data: an embedded default (taxonomy.yaml) that a
// curator's file extends, re-read when it changes. The Classifier is
// deterministic: cues and phrasings of each category, matched with typo
// repair and stemming, plus tags, error categories and the correction
// diff.
package lesson
