// Package boltopt holds the options every bbolt file of precept is opened
// with: the feedback read index, the evaluator's state and the analytics
// store (docs/thresholds.md, "Restart").
package boltopt

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// OpenTimeout is how long Open waits for another process's lock on the
// file before it fails.
const OpenTimeout = 5 * time.Second

// Options writes the freelist with every commit, so that opening a file
// reads it back instead of rebuilding it by walking every page of the
// file: with the freelist unsynced, that walk grew with the file and was
// 20 of a restart's 21 seconds at a million stored decisions. The
// hashmap freelist keeps finding free pages cheap in a large file.
func Options() *bolt.Options {
	return &bolt.Options{Timeout: OpenTimeout, FreelistType: bolt.FreelistMapType}
}
