// Package gitcli drives the git CLI against a remote repository that is
// not precept's own: a throwaway bare clone of the branches asked for,
// files read and committed with plumbing commands (no worktree, no
// filters, so bytes stay as they are), and a push guarded by a lease.
//
// precept's own repositories are written with go-git in lib/gitrepo. The
// instruction-file sync (docs/instructions.md) runs from the precept CLI,
// which links no server code, and against repositories people host
// anywhere: the git CLI brings their SSH setup and credential helpers,
// and this package adds credentials from the environment without putting
// them on a command line, in a log or in an error. Only the commands that
// talk to the remote get them, and only for the remote's own protocol and
// host: git follows no redirect. A context that ends kills git with the
// helpers it started (remote.go, proc_unix.go).
package gitcli
