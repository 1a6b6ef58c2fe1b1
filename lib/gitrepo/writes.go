package gitrepo

import (
	"errors"
	"sync/atomic"
)

// WriteStats counts the outcomes of the commits and pushes a Repo made
// since Open (ObjectStats.Writes), for monitoring (precept_git_commits_total and
// precept_git_pushes_total; docs/operations.md).
type WriteStats struct {
	// Commits that moved their branch; CommitsRaced lost the
	// compare-and-swap to another writer (Update retries those);
	// CommitsFailed failed otherwise (objects not written, ref not
	// moved): a disk or permission problem, or a bug.
	Commits, CommitsRaced, CommitsFailed uint64
	// Pushes the remote took (or had already); PushesRejected were
	// refused as non-fast-forward (the caller fetches and retries);
	// PushesFailed failed otherwise: the remote unreachable, credentials
	// refused. A caller that fetches before it pushes and stops when the
	// fetch fails counts nothing here: rules counts its syncs itself
	// (rules.SyncStats).
	Pushes, PushesRejected, PushesFailed uint64
}

// writeCount holds a Repo's WriteStats.
type writeCount struct {
	commits, commitsRaced, commitsFailed atomic.Uint64
	pushes, pushesRejected, pushesFailed atomic.Uint64
}

func (w *writeCount) commit(err error) {
	switch {
	case err == nil:
		w.commits.Add(1)
	case errors.Is(err, ErrRefChanged):
		w.commitsRaced.Add(1)
	default:
		w.commitsFailed.Add(1)
	}
}

func (w *writeCount) push(err error) {
	switch {
	case err == nil:
		w.pushes.Add(1)
	case errors.Is(err, ErrRefChanged):
		w.pushesRejected.Add(1)
	default:
		w.pushesFailed.Add(1)
	}
}

// stats returns the counts so far.
func (w *writeCount) stats() WriteStats {
	return WriteStats{
		Commits: w.commits.Load(), CommitsRaced: w.commitsRaced.Load(), CommitsFailed: w.commitsFailed.Load(),
		Pushes: w.pushes.Load(), PushesRejected: w.pushesRejected.Load(), PushesFailed: w.pushesFailed.Load(),
	}
}
