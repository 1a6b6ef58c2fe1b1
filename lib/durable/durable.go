// Package durable holds what makes a file write survive a crash beyond
// the file's own fsync: flushing the directory that names it, so a
// rename or a new file is on disk too. The git repositories, the vector
// index's journal and the CLI's exports use it.
package durable

import (
	"fmt"
	"os"
)

// SyncDir flushes a directory's entries, such as a rename into it, to
// disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
