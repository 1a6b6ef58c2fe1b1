// Package feedbackstore keeps every HITL decision, and every
// clarification of an ambiguous one, durably and serves them back fast.
//
// The source of truth is a git repository of its own
// (docs/architecture.md), so decision commits never drown the rules
// repository's review history. Each decision is one JSON file at
// feedback/decisions/<a>/<b>/<c>/<id>.json, where a, b and c are the
// first hex digits of the SHA-256 of its id: a commit rewrites only the
// trees along its files' paths, and whether a decision is already stored
// is one tree lookup at the branch tip. Decisions are committed in
// batches (by count and by time); callers of Store wait for the commit
// that holds their decisions, so "stored" means durable.
//
// The conversation with a reviewer about an ambiguous decision — the
// questions asked and the replies given — is a record beside it, at
// feedback/clarifications/<a>/<b>/<c>/<id>.json, changed with
// compare-and-swap commits that record each question and reply once
// (docs/clarification.md). Edge cases are documented for people under
// feedback/edge_cases/.
//
// Reads never scan git. Each replica keeps a local index (bbolt) that
// follows the branch commit by commit, in first-parent order, and numbers
// what each commit added: its decisions, then the clarification records
// it wrote. The numbering is the same on every replica, so the evaluator
// follows it (Entries) and every replica derives the same state. The
// index is derived state: deleted or behind, it is rebuilt from git.
package feedbackstore
