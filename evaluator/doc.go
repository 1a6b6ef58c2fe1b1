// Package evaluator is precept's evaluator agent: for every
// decision it finds similar feedback, keeps clusters, and says — with a
// confidence and a rationale — whether the feedback is positive,
// ambiguous, an edge case, or generalizable (docs/thresholds.md).
//
// Statistics decide: a cluster is generalizable when it holds enough
// similar negatives from enough distinct reviewers (and, for HIGH, epics);
// raw totals never count. Clear but unsupported feedback is an
// edge case; negative feedback that fails the clarity rubric is ambiguous
// and waits for a human. An optional LLM may explain or downgrade, never
// upgrade past what the cluster supports; when it fails the deterministic
// result stands.
//
// The Service follows the feedback store in commit order, so every
// replica derives the same clusters with the same ids; it keeps its state
// (evaluations, clusters, its position) in a local database and the
// embeddings in a vector index.
package evaluator
