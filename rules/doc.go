// Package rules manages rule proposals and their meta-approval, and the
// rules agents run with, in the git rules repository (docs/lifecycle.md;
// the repository's layout and file formats are in docs/formats.md).
//
// The repository is the system of record. On its main branch:
//
//	rules/active/<agent>/<rule_id>.md     approved rules (front matter + text)
//	rules/rejected/<proposal_id>.md       rejected proposals, with the reason
//	rules/drafts/<proposal_id>.md         drafts a guard blocked or deferred,
//	                                      or merged into an existing rule
//	prompts/<stage>.md                    base stage prompts
//	prompts/**/_rules.md                  directory-scoped rules
//	tuning/examples/<agent>/<good|bad>/   approve / reject notes
//
// A proposal lives on branch proposal/<proposal_id> as
// rules/proposals/<proposal_id>.md until it is decided; every transition
// is a commit whose trailers say who and why (Approved-by, Rejected-by,
// Rolled-back-by, Reason, Feedback-Ids, Proposal-Id, Rule-Id), so history
// is the audit log.
//
// # Three packages
//
// The rules repository is handled by three packages, each importing only
// the ones below it (docs/architecture.md, "Inside rules"):
//
//   - rules/rulefmt holds the types and file formats other packages read:
//     proposals, rules, their kinds and statuses, the front-matter files,
//     the repository layout and trailers, evidence, Change, history
//     entries.
//   - rules/gitstore is the repository: its Store builds the State at the
//     current ref tips, reads history, builds the commits of approvals and
//     lifecycle proposals, and commits with compare-and-swap
//     (gitrepo.Repo.Update), so stores in several processes may share a
//     repository. Every cache of what was read from git is unexported
//     there, under one lock.
//   - This package is the policy and the workflow over the store.
//
// The policy (policy.go, guards.go, draft.go, conflict.go, quality.go,
// instruction.go) decides: the guards a draft passes before anything is
// committed (safety floor, quality gate, rejected before,
// reconsolidation and conflicts, rule cap, rate cap), drafting from
// evidence (with an LLM and the draft_rule.tmpl template beside this
// file, or extractively), consolidation at the rule cap, and the rules of
// meta-approval (distinct approvers, no self-approval, revisions). It
// reads no repository: each of its functions takes a gitstore.State, a
// proposal and the options; it remembers only the vectors of rule texts
// it has embedded.
//
// The workflow runs each operation: read the state, ask the policy,
// commit the outcome, tell OnChange listeners. Manager (manager.go,
// propose.go, approve.go, gitmerge.go, rollback.go, remote.go, query.go)
// drafts, decides, merges, rolls back and syncs; its requests are structs
// (ApproveRequest, RejectRequest, RollbackRequest). Upkeep (upkeep.go) is
// what the learning loop does to approved rules: record their effects,
// move idle rules to SHADOW, make and withdraw lifecycle proposals. Both
// share a recorder (recorder.go): the store, the clock, the log and the
// listeners.
//
// A Manager drafts a proposal for each generalizable cluster an
// EvidenceSource offers. A draft a guard holds is recorded under
// rules/drafts/ with the reason, so it stays visible. Approvals are
// commits on the proposal's branch; once a proposal has its approvals it
// is merged into main as its rule, in the same commit as the tuning
// examples of its approvals and the removal of the rules it supersedes. A
// rejection is one commit on main. Rollback restores every path the
// approval changed. With a remote, a merge of a proposal branch into the
// remote's main approves it in the name of the committer, and deleting an
// unmerged proposal branch rejects it.
package rules
