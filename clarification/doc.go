// Package clarification is the domain logic of the clarification loop
// (docs/clarification.md). When the evaluator finds a decision
// AMBIGUOUS, its reviewer is asked for what the feedback lacks; their
// replies are evaluated again until the decision is clear, or — after
// MaxAttempts questions — it is left for human review and later replies
// are only kept.
//
// Next and AfterReply are the state machine: plain functions of where a
// conversation stands (Situation), the Options and the time, which say
// what happens next. Service keeps the conversation where it lasts: each
// question and reply is recorded once in the decision's clarification
// record in the feedback store, and the evaluator applies the records in
// the store's commit order, so every replica reaches the same
// classifications from git alone.
//
// The package knows no chat system: an adapter (internal/slackapp) posts
// the questions, receives the replies, checks who may answer, and asks
// this package what to do.
package clarification
