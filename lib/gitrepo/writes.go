package gitrepo

import (
	"errors"
	"sync/atomic"
	"time"
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
	// PushSeconds is how long the pushes took, whatever their outcome
	// (precept_git_push_seconds).
	PushSeconds Histogram
}

// PushBuckets are the upper bounds, in seconds, of PushSeconds' buckets:
// a push to a server on the same network takes tens of milliseconds, one
// across a region hundreds, and one past 10 s is an outage in the making.
var PushBuckets = pushBounds[:]

var pushBounds = [...]float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Histogram is a count of durations by bucket: Buckets[i] counts those
// up to PushBuckets[i] (cumulative, as Prometheus reads them), Count all
// of them and Sum their seconds.
type Histogram struct {
	Buckets []uint64
	Count   uint64
	Sum     float64
}

// writeCount holds a Repo's WriteStats.
type writeCount struct {
	commits, commitsRaced, commitsFailed atomic.Uint64
	pushes, pushesRejected, pushesFailed atomic.Uint64
	pushBuckets                          [len(pushBounds)]atomic.Uint64
	pushCount, pushNanos                 atomic.Uint64
}

// pushTook counts a push that took d.
func (w *writeCount) pushTook(d time.Duration) {
	for i, b := range pushBounds {
		if d.Seconds() <= b {
			w.pushBuckets[i].Add(1)
			break
		}
	}
	w.pushCount.Add(1)
	w.pushNanos.Add(uint64(max(d, 0)))
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
		PushSeconds: w.pushHistogram(),
	}
}

// pushHistogram reads the push durations, cumulative by bucket.
func (w *writeCount) pushHistogram() Histogram {
	h := Histogram{Buckets: make([]uint64, len(pushBounds)), Count: w.pushCount.Load(), Sum: time.Duration(w.pushNanos.Load()).Seconds()}
	var run uint64
	for i := range pushBounds {
		run += w.pushBuckets[i].Load()
		h.Buckets[i] = run
	}
	return h
}
