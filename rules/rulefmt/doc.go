// Package rulefmt holds what other packages read of the rules repository
// (docs/formats.md, "The rules repository"; docs/lifecycle.md): the
// types of proposals and rules, with their kinds and statuses; their
// files, Markdown with YAML front matter, parsed and rendered
// (proposal.go, rulefile.go); where things live in the repository and the
// commit trailers that record every transition (layout.go); the evidence a
// proposal is drafted from (evidence.go); the Change a rule manager
// reports to its listeners (change.go); and the types of lifecycle
// proposals, which decide on an existing rule (lifecycle.go).
//
// It reads no repository and imports no other precept package, so prompt
// assembly and the learning loop can read rule files without linking the
// rule store or its policy.
package rulefmt
