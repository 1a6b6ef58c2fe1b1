package gitrepo

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// CommitInfo is a commit as callers see it.
type CommitInfo struct {
	Hash    Hash
	Tree    Hash
	Parents []Hash
	Subject string
	// Message is the full message, trailers included.
	Message     string
	AuthorName  string
	AuthorEmail string
	// CommitterName and CommitterEmail say who recorded the commit; for a
	// merge done on a git host it is the person who merged.
	CommitterName  string
	CommitterEmail string
	When           time.Time
	Trailers       []Trailer
}

// Trailer returns the first value of trailer key, or "".
func (c CommitInfo) Trailer(key string) string {
	for _, t := range c.Trailers {
		if strings.EqualFold(t.Key, key) {
			return t.Value
		}
	}
	return ""
}

// TrailerValues returns every value of trailer key.
func (c CommitInfo) TrailerValues(key string) []string {
	var out []string
	for _, t := range c.Trailers {
		if strings.EqualFold(t.Key, key) {
			out = append(out, t.Value)
		}
	}
	return out
}

var trailerLine = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]*): (.*)$`)

// ParseTrailers returns the trailers of a commit message: the "Key: value"
// lines of its last paragraph, when every line there is one.
func ParseTrailers(msg string) []Trailer {
	msg = strings.TrimRight(msg, "\n")
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 {
		return nil
	}
	var out []Trailer
	for _, line := range strings.Split(msg[i+2:], "\n") {
		m := trailerLine.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		out = append(out, Trailer{Key: m[1], Value: m[2]})
	}
	return out
}

func info(c *object.Commit) CommitInfo {
	subject, _, _ := strings.Cut(c.Message, "\n")
	return CommitInfo{
		Hash:           c.Hash,
		Tree:           c.TreeHash,
		Parents:        c.ParentHashes,
		Subject:        subject,
		Message:        c.Message,
		AuthorName:     c.Author.Name,
		AuthorEmail:    c.Author.Email,
		CommitterName:  c.Committer.Name,
		CommitterEmail: c.Committer.Email,
		When:           c.Committer.When,
		Trailers:       ParseTrailers(c.Message),
	}
}

// CommitInfo returns one commit.
func (r *Repo) CommitInfo(h Hash) (CommitInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.commitObject(h)
	if err != nil {
		return CommitInfo{}, err
	}
	return info(c), nil
}

// LogOptions filter a history walk.
type LogOptions struct {
	// Path keeps only commits that changed files at or under this path
	// relative to their first parent.
	Path string
	// Limit stops after this many commits; 0 means no limit.
	Limit int
	// FirstParent follows only first parents, as `git log --first-parent`.
	FirstParent bool
}

// Log walks history back from commit start, newest first.
func (r *Repo) Log(start Hash, opts LogOptions) ([]CommitInfo, error) {
	var out []CommitInfo
	queued := map[Hash]bool{start: true}
	first, err := r.CommitInfo(start)
	if err != nil {
		return nil, err
	}
	queue := []CommitInfo{first}
	for len(queue) > 0 && (opts.Limit == 0 || len(out) < opts.Limit) {
		// Take the newest queued commit, so merged histories interleave by
		// time as git log shows them.
		best := 0
		for i := range queue {
			if queue[i].When.After(queue[best].When) {
				best = i
			}
		}
		ci := queue[best]
		queue = append(queue[:best], queue[best+1:]...)
		parents := ci.Parents
		if opts.FirstParent && len(parents) > 1 {
			parents = parents[:1]
		}
		for _, p := range parents {
			if queued[p] {
				continue
			}
			queued[p] = true
			pi, err := r.CommitInfo(p)
			if err != nil {
				return nil, err
			}
			queue = append(queue, pi)
		}
		if opts.Path != "" {
			var parent Hash
			if len(ci.Parents) > 0 {
				parent = ci.Parents[0]
			}
			changes, err := r.Diff(parent, ci.Hash, opts.Path)
			if err != nil {
				return nil, err
			}
			if len(changes) == 0 {
				continue
			}
		}
		out = append(out, ci)
	}
	return out, nil
}

// FirstParentRange returns the commits on the first-parent chain from to
// back to (not including) from, oldest first. from must be on that chain
// (or ZeroHash for the whole chain); otherwise ErrNotAncestor is returned,
// e.g. when history was rewritten.
func (r *Repo) FirstParentRange(from, to Hash) ([]CommitInfo, error) {
	var chain []CommitInfo
	for h := to; h != from; {
		if h.IsZero() {
			return nil, fmt.Errorf("range %s..%s: %w", short(from), short(to), ErrNotAncestor)
		}
		ci, err := r.CommitInfo(h)
		if err != nil {
			return nil, err
		}
		chain = append(chain, ci)
		if len(ci.Parents) == 0 {
			h = ZeroHash
		} else {
			h = ci.Parents[0]
		}
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// ErrNotAncestor: a commit expected in a branch's history is not there.
var ErrNotAncestor = errors.New("not an ancestor")
