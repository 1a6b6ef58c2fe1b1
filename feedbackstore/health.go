package feedbackstore

import (
	"fmt"
	"sync"
	"time"
)

// failureMemory is how long a failed commit keeps the store unhealthy
// when nothing has been committed since: the stream consumer retries
// failed batches far sooner, so a lasting fault keeps the failure fresh.
const failureMemory = 30 * time.Second

// probeEvery is how long a write probe's outcome is reused: readiness
// probes come every second or more often, unauthenticated.
const probeEvery = time.Second

// health remembers the outcome of the last commit and of the last write
// probe.
type health struct {
	mu       sync.Mutex
	failed   error
	failedAt time.Time

	probeMu  sync.Mutex
	probed   error
	probedAt time.Time
}

func (h *health) record(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.failed = nil
		return
	}
	h.failed, h.failedAt = err, now
}

// Health returns nil when the store can commit: the repository's disk
// accepts a write and the last commit did not fail (or failed long
// enough ago with nothing attempted since). preceptd is not ready while
// it returns an error (docs/architecture.md, "Health").
func (s *Store) Health() error {
	s.health.probeMu.Lock()
	if time.Since(s.health.probedAt) >= probeEvery {
		s.health.probed, s.health.probedAt = s.repo.CheckWritable(), time.Now()
	}
	probed := s.health.probed
	s.health.probeMu.Unlock()
	if probed != nil {
		return probed
	}
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if s.health.failed != nil && time.Since(s.health.failedAt) < failureMemory {
		return fmt.Errorf("the last commit failed %s ago: %w", time.Since(s.health.failedAt).Round(time.Second), s.health.failed)
	}
	return nil
}
