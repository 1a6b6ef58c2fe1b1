// Package analytics keeps what the decisions at the HITL gates add up
// to, per agent, gate and day: decisions by verdict, first-pass
// acceptance, edit distance, the distribution of error categories (tags,
// error_categories and the evaluator's lesson categories),
// review-duration percentiles and quality scores (docs/analytics.md).
//
// An Aggregate follows the feedback store in commit order, as the
// evaluator does, and adds each decision to its cell once. Cells live in
// memory for queries and in a node-local bbolt file with the position
// reached; losing the file costs a rebuild from the feedback store, which
// yields the same figures.
package analytics
