// Package mapbound bounds how much of the process's memory-mapped bbolt
// files stays resident in it (docs/operations.md, "Memory").
//
// bbolt reads through a shared, read-only map of its file. Every page a
// read touches stays in the process's page tables, and so in its RSS,
// until the kernel reclaims it under pressure; a store whose keys are
// written in random order touches every leaf over time, so the resident
// part of the maps grows to the size of the files (4.7 GiB at a million
// decisions). Those pages are clean copies of the page cache: releasing
// them from the process (madvise MADV_DONTNEED on the map) frees nothing
// the data needs — the next read faults the page back in from the page
// cache, or from disk if the kernel evicted it. A Bound checks the
// process's file-backed resident memory every interval and releases the
// tracked maps when it is above the budget, so the maps cost the working
// set of the last interval rather than every page ever read.
package mapbound

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Defaults of a Bound.
const (
	// DefaultBudget is the file-backed resident memory above which the
	// maps are released: the hot pages of a working day and the binary.
	DefaultBudget int64 = 384 << 20
	// DefaultInterval is how often the resident size is read.
	DefaultInterval = 5 * time.Second
)

var (
	mu      sync.Mutex
	tracked = map[*bolt.DB]struct{}{}
)

// Track adds db to the maps a Bound releases until the returned function
// is called, which must happen before db is closed.
func Track(db *bolt.DB) (untrack func()) {
	mu.Lock()
	tracked[db] = struct{}{}
	mu.Unlock()
	return sync.OnceFunc(func() {
		mu.Lock()
		delete(tracked, db)
		mu.Unlock()
	})
}

// Release drops the resident pages of every tracked map from the process
// and returns how many bytes of maps it advised. A map is advised inside
// a read transaction, which holds bbolt's remap lock, so the range is the
// database's map for the whole call and never memory that replaced it.
func Release() (int64, error) {
	mu.Lock()
	defer mu.Unlock()
	var total int64
	var errs []error
	for db := range tracked {
		n, err := release(db)
		errs = append(errs, err)
		total += n
	}
	return total, errors.Join(errs...)
}

func release(db *bolt.DB) (int64, error) {
	var n int64
	err := db.View(func(tx *bolt.Tx) error {
		info := db.Info()
		n = tx.Size()
		if info == nil || info.Data == 0 || n <= 0 {
			n = 0
			return nil
		}
		_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, info.Data, uintptr(n), syscall.MADV_DONTNEED)
		if errno != 0 {
			return fmt.Errorf("release %s: madvise: %w", db.Path(), errno)
		}
		return nil
	})
	return n, err
}

// Status is what a Bound has seen and done.
type Status struct {
	// Budget is the file-backed resident size above which maps are
	// released.
	Budget int64
	// FileResident is the process's file-backed resident memory at the
	// last check: the tracked maps, other maps and the binary's text.
	FileResident int64
	// Releases counts the times the maps were released.
	Releases uint64
}

// Bound releases the tracked maps whenever the process's file-backed
// resident memory is above Budget.
type Bound struct {
	Budget   int64
	Interval time.Duration
	// Read returns the file-backed resident size; nil reads
	// /proc/self/smaps_rollup.
	Read func() (int64, error)

	resident atomic.Int64
	releases atomic.Uint64
}

// Status returns the last check's figures.
func (b *Bound) Status() Status {
	return Status{Budget: b.Budget, FileResident: b.resident.Load(), Releases: b.releases.Load()}
}

// Run checks every Interval until ctx ends. It returns only ctx's end:
// a check that fails is retried at the next interval.
func (b *Bound) Run(ctx context.Context) error {
	t := time.NewTicker(b.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			b.Check()
		}
	}
}

// Check reads the resident size once and releases the maps if it is
// above the budget; it reports whether it released them.
func (b *Bound) Check() bool {
	read := b.Read
	if read == nil {
		read = FileResident
	}
	n, err := read()
	if err != nil {
		return false
	}
	b.resident.Store(n)
	if n <= b.Budget {
		return false
	}
	if _, err := Release(); err != nil {
		return false
	}
	b.releases.Add(1)
	return true
}

// FileResident returns the process's resident memory that is not
// anonymous (Rss minus Anonymous in /proc/self/smaps_rollup): file maps,
// the binary's text and shared memory.
func FileResident() (int64, error) {
	data, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, err
	}
	return parseRollup(data)
}

func parseRollup(data []byte) (int64, error) {
	var rss, anon int64 = -1, -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) != 3 || string(f[2]) != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		switch string(f[0]) {
		case "Rss:":
			rss = kb << 10
		case "Anonymous:":
			anon = kb << 10
		}
	}
	if rss < 0 || anon < 0 {
		return 0, fmt.Errorf("smaps_rollup: no Rss or Anonymous line")
	}
	return max(0, rss-anon), nil
}
