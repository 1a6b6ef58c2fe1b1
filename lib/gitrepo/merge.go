package gitrepo

import (
	"fmt"
	"sort"
)

// MergeBase returns the best common ancestor of commits a and b, as `git
// merge-base a b` does, or ZeroHash when they share no history. When
// criss-cross merges leave several best ancestors, the newest is returned.
func (r *Repo) MergeBase(a, b Hash) (Hash, error) {
	if a == b {
		return a, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ca, err := r.commitObject(a)
	if err != nil {
		return ZeroHash, err
	}
	cb, err := r.commitObject(b)
	if err != nil {
		return ZeroHash, err
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return ZeroHash, fmt.Errorf("merge base of %s and %s: %w", short(a), short(b), err)
	}
	if len(bases) == 0 {
		return ZeroHash, nil
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i].Committer.When.After(bases[j].Committer.When) })
	return bases[0].Hash, nil
}

// MergeResult is a file-level three-way merge of two commits.
type MergeResult struct {
	// Base is the merge base the sides were compared against (ZeroHash
	// for unrelated histories).
	Base Hash
	// Changes turn ours' tree into the merged tree; commit them on ours
	// with theirs as a merge parent.
	Changes []Change
	// Conflicts are the paths both sides changed differently. The merged
	// tree holds theirs' version of each (or lacks the file when theirs
	// deleted it).
	Conflicts []string
}

// MergeFiles merges commit theirs into commit ours file by file against
// their merge base: a file changed on one side only gets that side's
// version, a file changed the same way on both sides is kept, and a file
// both sides changed differently — a true conflict — gets theirs' version
// and is listed in Conflicts. The merge is per file, not per line: the
// rules repository holds small files that people and precept edit whole.
// File modes are not carried over; every merged file is a regular file.
func (r *Repo) MergeFiles(ours, theirs Hash) (MergeResult, error) {
	base, err := r.MergeBase(ours, theirs)
	if err != nil {
		return MergeResult{}, err
	}
	res := MergeResult{Base: base}
	theirChanges, err := r.Diff(base, theirs, "")
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", short(theirs), short(ours), err)
	}
	ourChanges, err := r.Diff(base, ours, "")
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge %s into %s: %w", short(theirs), short(ours), err)
	}
	mine := make(map[string]PathChange, len(ourChanges))
	for _, c := range ourChanges {
		mine[c.Path] = c
	}
	for _, tc := range theirChanges {
		if oc, changedByUs := mine[tc.Path]; changedByUs {
			if sameOutcome(oc, tc) {
				continue
			}
			res.Conflicts = append(res.Conflicts, tc.Path)
		}
		if tc.Kind == Deleted {
			res.Changes = append(res.Changes, Change{Path: tc.Path, Delete: true})
			continue
		}
		data, err := r.ReadBlob(tc.Blob)
		if err != nil {
			return MergeResult{}, fmt.Errorf("merge %s into %s: %w", short(theirs), short(ours), err)
		}
		res.Changes = append(res.Changes, Change{Path: tc.Path, Data: data})
	}
	return res, nil
}

// sameOutcome reports whether two changes to one path leave the same
// content: both deleted it, or both wrote the same blob.
func sameOutcome(a, b PathChange) bool {
	if a.Kind == Deleted || b.Kind == Deleted {
		return a.Kind == b.Kind
	}
	return a.Blob == b.Blob
}
