// Package impact previews what a rule proposal would do before anyone
// approves it (docs/lifecycle.md, "Impact preview"):
//
//   - the past negative decisions it addresses: its cluster and its
//     lesson category, per agent and per epic;
//   - the approved decisions in its scope it could over-correct;
//   - the rules, _rules.md files and base prompts on main that say
//     something similar or the opposite;
//   - with an LLM, a replay of the rule as a checker over the evidence's
//     agent outputs and a sample of approved outputs, as precision and
//     recall.
//
// A Service computes previews in the background, keeps the latest in
// memory and the replays on disk, so answering a request never waits for
// a computation or an LLM.
package impact
