// Package reload serves a value parsed from a file that operators may
// edit while the service runs: the file is parsed again when its
// modification time or size changes, and a file that stops parsing keeps
// the last good value in use (docs/lessons.md, the curator taxonomy;
// docs/thresholds.md, the clarity rubric).
package reload

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// File is a value parsed from a file, re-read on change. Safe for
// concurrent use.
type File[T any] struct {
	what  string
	path  string
	parse func([]byte) (T, error)

	mu       sync.Mutex
	cur      T
	mod      time.Time
	size     int64
	err      error
	failures uint64
}

// Status is what a File's reloads came to: the file, why the last
// reload failed (nil after a good one), and how many reloads failed since
// the file was opened. A service logs, counts and reports these so that
// a broken file is never silent (docs/lessons.md).
type Status struct {
	What     string // "taxonomy file"
	Path     string
	Err      error
	Failures uint64
}

// New returns the value in the file at path, which must exist and parse
// now; what names the file in errors ("taxonomy file"). With an empty
// path it serves def and reads nothing.
func New[T any](what, path string, def T, parse func([]byte) (T, error)) (*File[T], error) {
	f := &File[T]{what: what, path: path, parse: parse, cur: def}
	if path == "" {
		return f, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reloadLocked(); err != nil {
		return nil, err
	}
	return f, nil
}

// Fixed serves def and never reads a file.
func Fixed[T any](def T) *File[T] { return &File[T]{cur: def} }

// Path is the file, "" when there is none.
func (f *File[T]) Path() string { return f.path }

// Get returns the current value, parsing the file again first when it
// changed.
func (f *File[T]) Get() T {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshLocked()
	return f.cur
}

// Status parses the file again when it changed, like Get, and says how
// its reloads went.
func (f *File[T]) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshLocked()
	return Status{What: f.what, Path: f.path, Err: f.err, Failures: f.failures}
}

func (f *File[T]) refreshLocked() {
	if f.path == "" {
		return
	}
	if fi, err := os.Stat(f.path); err == nil && (!fi.ModTime().Equal(f.mod) || fi.Size() != f.size) {
		if f.err = f.reloadLocked(); f.err != nil {
			f.failures++
		}
	}
}

// Err is the last reload failure, nil after a good reload.
func (f *File[T]) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *File[T]) reloadLocked() error {
	fi, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("%s: %w", f.what, err)
	}
	data, err := os.ReadFile(f.path)
	// Remember the file's state either way, so a broken file is not
	// parsed again on every call.
	f.mod, f.size = fi.ModTime(), fi.Size()
	if err != nil {
		return fmt.Errorf("%s: %w", f.what, err)
	}
	v, err := f.parse(data)
	if err != nil {
		return fmt.Errorf("%s %s: %w", f.what, f.path, err)
	}
	f.cur = v
	return nil
}
