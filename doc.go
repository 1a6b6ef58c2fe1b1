// Package precept holds the domain types every part of precept shares: the
// HITL decision event and its validation, the stored feedback record,
// caller identities and roles, and errors whose messages are safe to show
// to clients.
//
// precept consumes HITL decisions, stores them in git, classifies them
// (package evaluator), turns generalizable feedback into rule proposals
// that humans approve (package rules) and injects approved rules into
// agents' stage prompts (package prompts). Adapters for Redis, Chroma,
// Slack and Connect live under internal/ and depend on this package, never
// the other way round.
package precept
