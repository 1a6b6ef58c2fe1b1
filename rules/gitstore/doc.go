// Package gitstore is the rules repository as the rule manager reads and
// writes it (docs/architecture.md, "Inside rules"): the bottom of the
// three layers of the rules packages.
//
// A Store builds the State at the current ref tips (state.go, load.go):
// the proposals on their branches, the rejected ones, held drafts, and
// the active and shadow rules. It reads history from commit trailers
// (history.go), and commits with compare-and-swap (gitrepo.Repo.Update),
// so stores in several processes may share a repository. specs.go builds
// the commits that turn an approved proposal into its rule, or carry out
// an approved lifecycle proposal.
//
// Every cache of what was read from git — files parsed by blob, commit
// metadata, whether a commit added a rule, the commits reachable from
// main, the history index, the last state — is unexported and lives in
// the Store, under one lock; the policy and the workflow in package rules
// reach the repository only through the Store's methods. A State and a
// History are immutable once built: callers read them and copy out.
package gitstore
