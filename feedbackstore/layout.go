package feedbackstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/precept-dev/precept/lib/gitrepo"
)

// LayoutPath is the file that says how a feedback repository shards its
// decision and clarification files (docs/formats.md, "The feedback
// repository").
const LayoutPath = "feedback/layout.json"

// Layout is how a feedback repository shards decision files: Levels
// directories, each named by one hex digit of the SHA-256 of the decision
// id. A batch commit rewrites every tree along the paths it adds, so the
// bytes a batch writes grow with the size of its leaf directories: with
// three levels a leaf holds 244 decisions at a million stored and a batch
// of 500 rewrote about 7 MB of trees, which made the repository grow with
// the square of its size. Four levels keep leaves near 15 entries at a
// million (docs/decisions/0002-feedback-repository.md, "Amendment").
type Layout struct {
	Levels int `json:"decision_shard_levels"`
}

var (
	// LayoutLegacy is the layout of a repository that holds decisions
	// or clarifications and no layout file: every repository written before the layout
	// file existed.
	LayoutLegacy = Layout{Levels: 3}
	// LayoutCurrent is the layout a new repository gets.
	LayoutCurrent = Layout{Levels: 4}
)

// maxLevels bounds what a layout file may ask for.
const maxLevels = 8

// DecisionPath returns the file that holds a decision.
func (l Layout) DecisionPath(id string) string {
	return DecisionsDir + "/" + l.shard(id) + id + ".json"
}

// ClarificationPath returns the file that holds a decision's
// clarification record, sharded like the decision's own file.
func (l Layout) ClarificationPath(id string) string {
	return ClarificationsDir + "/" + l.shard(id) + id + ".json"
}

// shard is "<a>/<b>/…/", one hex digit of SHA-256(id) per level.
func (l Layout) shard(id string) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:(l.Levels+1)/2])
	var b strings.Builder
	for i := range l.Levels {
		b.WriteByte(h[i])
		b.WriteByte('/')
	}
	return b.String()
}

// readLayout returns the layout snap's repository uses, and the layout
// file to write with the first sharded file when the repository has none
// yet. A layout file that cannot be read is an error, not a default: a
// guess would store decisions a second time under other paths.
func readLayout(snap *gitrepo.Snapshot) (Layout, *gitrepo.Change, error) {
	b, err := snap.ReadFile(LayoutPath)
	switch {
	case err == nil:
		var l Layout
		if err := json.Unmarshal(b, &l); err != nil {
			return Layout{}, nil, fmt.Errorf("read %s: %w", LayoutPath, err)
		}
		if l.Levels < 1 || l.Levels > maxLevels {
			return Layout{}, nil, fmt.Errorf("read %s: decision_shard_levels %d: want 1 to %d", LayoutPath, l.Levels, maxLevels)
		}
		return l, nil, nil
	case !errors.Is(err, gitrepo.ErrNotFound):
		return Layout{}, nil, fmt.Errorf("read %s: %w", LayoutPath, err)
	}
	for _, dir := range []string{DecisionsDir, ClarificationsDir} {
		entries, err := snap.List(dir)
		if err != nil {
			return Layout{}, nil, fmt.Errorf("read feedback layout: %w", err)
		}
		if len(entries) > 0 {
			return LayoutLegacy, nil, nil
		}
	}
	data, err := json.Marshal(LayoutCurrent)
	if err != nil {
		return Layout{}, nil, err
	}
	return LayoutCurrent, &gitrepo.Change{Path: LayoutPath, Data: append(data, '\n')}, nil
}

// Layout returns the layout of the branch's tip.
func (s *Store) Layout() (Layout, error) {
	snap, err := s.repo.Snapshot(Branch)
	if err != nil {
		return Layout{}, fmt.Errorf("read feedback layout: %w", err)
	}
	l, _, err := readLayout(snap)
	return l, err
}
