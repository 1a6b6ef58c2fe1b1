// Package rules manages rule proposals and their meta-approval, and the
// rules agents run with, in the git rules repository (DESIGN.md §5).
//
// The repository is the system of record. On its main branch:
//
//	rules/active/<agent>/<rule_id>.md     approved rules (front matter + text)
//	rules/rejected/<proposal_id>.md       rejected proposals, with the reason
//	prompts/<stage>.md                    base stage prompts
//	prompts/**/_rules.md                  directory-scoped rules
//	tuning/examples/<stage>/<good|bad>/   approve / reject notes
//
// A proposal lives on branch proposal/<proposal_id> as
// rules/proposals/<proposal_id>.md until it is decided; every transition
// is a commit whose trailers say who and why.
package rules
