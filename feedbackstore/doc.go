// Package feedbackstore keeps every HITL decision durably and serves it
// back fast.
//
// The source of truth is a git repository of its own (DESIGN.md §3), so
// decision commits never drown the rules repository's review history. Each
// decision is one JSON file at feedback/decisions/<ab>/<cd>/<id>.json,
// where ab/cd are the first bytes of the SHA-256 of its id: a commit
// rewrites only the trees along its files' paths, and whether a decision
// is already stored is one tree lookup at the branch tip. Decisions are
// committed in batches (by count and by time); callers of Store wait for
// the commit that holds their decisions, so "stored" means durable.
//
// Reads never scan git. Each replica keeps a local index (bbolt) that
// follows the branch commit by commit, in first-parent order, and numbers
// the decisions it applies. The numbering is the same on every replica, so
// the evaluator can follow it deterministically. The index is derived
// state: deleted or behind, it is rebuilt from git.
package feedbackstore
