package feedbackstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// Entry is one numbered change on the feedback branch: a decision
// stored, a clarification record as one commit wrote it, or a curator's
// correction. Exactly one of Decision, Clarification and Correction is
// set.
type Entry struct {
	Seq           uint64
	Decision      *Record
	Clarification *Clarification
	Correction    *Correction
}

// CatchUp applies the commits on the branch that the index has not seen,
// oldest first, and returns how many entries it indexed. When the branch
// no longer contains the indexed commit (history was rewritten), the
// index is rebuilt.
func (s *Store) CatchUp(ctx context.Context) (int, error) {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	tip, err := s.repo.Tip(Branch)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	applied, _, err := s.ix.applied()
	if err != nil {
		return 0, err
	}
	if applied == tip {
		return 0, nil
	}
	commits, err := s.repo.FirstParentRange(applied, tip)
	if errors.Is(err, gitrepo.ErrNotAncestor) {
		s.opts.Logger.Warn("feedback branch no longer contains the indexed commit; rebuilding the index", "indexed", applied.String(), "tip", tip.String())
		if err := s.ix.reset(); err != nil {
			return 0, err
		}
		commits, err = s.repo.FirstParentRange(gitrepo.ZeroHash, tip)
	}
	if err != nil {
		return 0, err
	}
	total := 0
	// Apply in chunks so a rebuild of a large history holds no huge
	// transaction and reports progress.
	const chunk = 64
	for len(commits) > 0 {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n := min(chunk, len(commits))
		var batch []appliedCommit
		for _, c := range commits[:n] {
			ac, err := s.readCommit(c)
			if err != nil {
				return total, err
			}
			batch = append(batch, ac)
		}
		added, err := s.ix.apply(batch)
		if err != nil {
			return total, fmt.Errorf("index commits: %w", err)
		}
		total += added
		commits = commits[n:]
	}
	if count, err := s.ix.count(); err != nil {
		s.opts.Logger.Warn("count indexed decisions", "err", err)
	} else {
		s.opts.Metrics.SetDecisions(count)
	}
	s.notifyMu.Lock()
	close(s.notify)
	s.notify = make(chan struct{})
	s.notifyMu.Unlock()
	return total, nil
}

// readCommit returns what one commit changed under DecisionsDir,
// ClarificationsDir and CorrectionsDir: decisions ordered by receive time
// then id, clarification records by decision id and corrections by id,
// so every replica numbers them alike.
func (s *Store) readCommit(c gitrepo.CommitInfo) (appliedCommit, error) {
	ac := appliedCommit{commit: c.Hash}
	s.ownMu.Lock()
	own, ok := s.own[c.Hash]
	delete(s.own, c.Hash)
	s.ownMu.Unlock()
	if ok {
		// This replica's decision commit: it holds nothing else.
		ac.added = own
	} else if err := s.readChanges(c, &ac); err != nil {
		return ac, err
	}
	sort.SliceStable(ac.added, func(i, j int) bool {
		a, b := ac.added[i], ac.added[j]
		if !a.ReceivedAt.Equal(b.ReceivedAt) {
			return a.ReceivedAt.Before(b.ReceivedAt)
		}
		return a.DecisionID < b.DecisionID
	})
	sort.Slice(ac.clarified, func(i, j int) bool { return ac.clarified[i].DecisionID < ac.clarified[j].DecisionID })
	sort.Slice(ac.corrected, func(i, j int) bool { return ac.corrected[i].ID < ac.corrected[j].ID })
	return ac, nil
}

// feedbackDir holds everything the index follows.
const feedbackDir = "feedback"

func (s *Store) readChanges(c gitrepo.CommitInfo, ac *appliedCommit) error {
	var parent gitrepo.Hash
	if len(c.Parents) > 0 {
		parent = c.Parents[0]
	}
	changes, err := s.repo.Diff(parent, c.Hash, feedbackDir)
	if err != nil {
		return fmt.Errorf("read commit %s: %w", c.Hash, err)
	}
	for _, ch := range changes {
		decision := strings.HasPrefix(ch.Path, DecisionsDir+"/")
		clarification := strings.HasPrefix(ch.Path, ClarificationsDir+"/")
		correction := strings.HasPrefix(ch.Path, CorrectionsDir+"/")
		if !decision && !clarification && !correction {
			continue
		}
		id := strings.TrimSuffix(ch.Path[strings.LastIndexByte(ch.Path, '/')+1:], ".json")
		if ch.Kind == gitrepo.Deleted {
			if decision {
				ac.deleted = append(ac.deleted, id)
			}
			// A deleted clarification or correction record changes
			// nothing that was applied: replies once given stay given,
			// and a correction is undone by another correction.
			continue
		}
		b, err := s.repo.ReadBlob(ch.Blob)
		if err != nil {
			return fmt.Errorf("read %s: %w", ch.Path, err)
		}
		if correction {
			if ch.Kind != gitrepo.Added {
				// Records are written once; an edit by hand is not a new
				// correction.
				s.opts.Logger.Warn("skip a changed correction record", "path", ch.Path, "commit", c.Hash.String())
				continue
			}
			co, err := decodeCorrection(b)
			if err != nil || co.ID != id {
				s.opts.Logger.Warn("skip undecodable correction file", "path", ch.Path, "commit", c.Hash.String(), "err", err)
				continue
			}
			ac.corrected = append(ac.corrected, co)
			continue
		}
		if clarification {
			cl, err := decodeClarification(b)
			if err != nil || cl.DecisionID != id {
				s.opts.Logger.Warn("skip undecodable clarification file", "path", ch.Path, "commit", c.Hash.String(), "err", err)
				continue
			}
			ac.clarified = append(ac.clarified, cl)
			continue
		}
		var f precept.Feedback
		if err := json.Unmarshal(b, &f); err != nil {
			// A file a person broke by hand: skip it rather than stop
			// indexing everything after it.
			s.opts.Logger.Warn("skip undecodable decision file", "path", ch.Path, "commit", c.Hash.String(), "err", err)
			continue
		}
		ac.added = append(ac.added, f)
	}
	return nil
}
