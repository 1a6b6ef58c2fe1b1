// Package rules manages rule proposals and their meta-approval, and the
// rules agents run with, in the git rules repository (DESIGN.md §5).
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
// is the audit log. Where proposals were posted to Slack is kept on the
// branch precept/slack, apart from the rule PRs.
//
// A Manager drafts a proposal for each generalizable cluster an
// EvidenceSource offers (with an LLM and the draft_rule.tmpl template
// beside this file, or extractively), and guards it before anything is
// committed: safety floor, quality gate, rejected before,
// reconsolidation and conflicts, rule cap, rate cap. A draft a guard
// holds is recorded under rules/drafts/ with the reason, so it stays
// visible. Approvals are commits on the proposal's branch; once a
// proposal has its approvals it is merged into main as its rule, in the
// same commit as the tuning examples of its approvals and the removal of
// the rules it supersedes. A rejection is one commit on main. Rollback
// restores every path the approval changed. With a remote, a merge of a
// proposal branch into the remote's main approves it in the name of the
// committer, and deleting an unmerged proposal branch rejects it.
//
// Every write is a compare-and-swap commit (gitrepo.Repo.Update), so
// Managers in several processes may share a repository, and approvals
// racing between them are all recorded.
package rules
