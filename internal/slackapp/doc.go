// Package slackapp is precept's Slack app (docs/lifecycle.md):
// meta-approval of rule proposals in Slack and the clarification loop for
// ambiguous decisions.
//
// Posting. Every pending proposal is posted to the configured channel as
// Block Kit: the agents and rule type, the rule, the evidence (counts,
// distinct reviewers and epics, quoted comments), conflicts and what it
// supersedes, the branch and review link, the approvals so far, and
// Approve / Reject buttons whose value is {proposal_id, revision, action}
// JSON. Where the message went is recorded by Posts on a branch of the
// rules repository of its own (PostBranch), so a restarted server, or
// another replica, updates the same message; every change the rule
// manager reports — decisions made in Slack, through the API or CLI, or
// by a merge in git — updates it, and a decided proposal shows its
// outcome instead of buttons. Failed posts and updates are retried with
// exponential backoff; attempts and the last error are recorded with the
// post. Nothing else waits for Slack.
//
// Approval deadlines. A pending proposal that waited longer than
// Options.ApprovalSLA, and still needs approvals, is re-posted in its
// thread, and again an SLA after each reminder, saying how many approvals
// it still needs and who may give them; a claim in the Store and the
// time recorded with its Post keep replicas
// and restarts from posting it twice (docs/lifecycle.md, "Approval
// deadlines").
//
// Interactions. Requests are verified with Slack's v0 signature; stale
// timestamps and replays (remembered in a Store shared by the replicas)
// are refused. Handlers answer at once and work after: a click opens a
// modal with one optional note, and its submission approves or rejects
// through the rule manager — the API's policy — as the precept identity
// slack.users maps the Slack user to, once that identity's role
// (Options.Roles, its API token's) includes DecisionRole, the role the
// API asks of the same decisions. A click on buttons of an old
// revision, on a decided proposal, or a second approval by the same
// person changes nothing and says why.
//
// Clarification. When the evaluator finds a decision AMBIGUOUS, its
// reviewer is asked in a thread for the rubric attributes the feedback
// lacks; their replies (Events API) re-evaluate it. This package is the
// adapter: it posts the questions, receives the replies, checks who may
// answer, and asks the clarification package what comes next. Questions
// and replies are recorded there, in the feedback repository, so every
// replica applies the same replies in the same order and nothing expires
// (docs/clarification.md). A scheduler re-asks stale items and recovers
// replies whose events were lost; short claims in the Store keep two
// replicas from posting the same question at once.
package slackapp
