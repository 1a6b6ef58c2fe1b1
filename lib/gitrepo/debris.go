package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Debris is what a write killed mid-way leaves in the object store: a
// temporary pack or index (tmp_pack_*, tmp_idx_*), a writability probe,
// or go-git's temporary objects, all named tmp_*. Nothing refers to them;
// without removal a crash-restart loop fills the disk
// (docs/thresholds.md, "Repository maintenance").

// debrisCount counts the temporary files removed and their bytes.
type debrisCount struct {
	files atomic.Uint64
	bytes atomic.Uint64
}

// debrisDirs are the folders, under the repository, temporary object
// files are written in.
var debrisDirs = []string{"objects", filepath.Join("objects", "pack")}

// removeDebris removes the temporary files in the object store that
// have gone unwritten for the options' DebrisAge, so that no live write,
// of this process or another sharing the repository, loses its file.
func (m maintenance) removeDebris() error {
	cutoff := m.now().Add(-m.debrisAge)
	var errs []error
	for _, dir := range debrisDirs {
		entries, err := os.ReadDir(filepath.Join(m.path, dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "tmp_") {
				continue
			}
			info, err := e.Info()
			if err != nil || info.ModTime().After(cutoff) {
				continue // gone already, or still being written
			}
			if err := os.Remove(filepath.Join(m.path, dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			m.debris.files.Add(1)
			m.debris.bytes.Add(uint64(info.Size()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove temporary object files: %w", err)
	}
	return nil
}
