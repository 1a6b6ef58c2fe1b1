//go:build !unix

package chromem

import (
	"fmt"
	"os"
)

// lockDir opens the lock file; without flock there is no cross-process
// lock on this platform, and a second process must not open the index.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	return f, nil
}
