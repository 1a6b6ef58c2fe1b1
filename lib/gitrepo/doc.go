// Package gitrepo is precept's git-backed store: bare repositories written
// with go-git and readable by the git CLI.
//
// A Repo commits file changes to a branch without a worktree: Update reads
// the branch tip, lets the caller compute changes against that snapshot,
// writes the new blobs, trees and commit, and moves the branch with a
// compare-and-swap that follows git's own lock-file protocol
// (refs/heads/<b>.lock, verify, write, fsync, rename). When another writer
// (a second preceptd replica sharing the data directory, or a person with
// the git CLI) moved the branch in between, Update runs the caller again on
// the new tip, so no commit is ever lost.
//
// Large commits are written as one packfile, small ones as loose objects,
// so batches of thousands of feedback files stay cheap. Trees are edited
// along the changed paths only and cached by hash; reading a file at a
// snapshot walks cached trees.
//
// go-git's storage is not safe for concurrent use, so a Repo serialises its
// own storage access; many goroutines may share one Repo.
package gitrepo
