package slackapp

import (
	"context"
	"sync"
	"time"
)

// MemoryStore is a Store in one process's memory for the package's tests
// (production uses RedisStore); expired keys are dropped when touched.
type MemoryStore struct {
	now func() time.Time

	mu    sync.Mutex
	items map[string]memItem
}

type memItem struct {
	value   string
	expires time.Time
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore whose keys expire by now
// (time.Now when nil).
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{now: now, items: map[string]memItem{}}
}

// get returns the live item at key; the caller holds mu.
func (s *MemoryStore) get(key string) (memItem, bool) {
	it, ok := s.items[key]
	if ok && !it.expires.IsZero() && !s.now().Before(it.expires) {
		delete(s.items, key)
		return memItem{}, false
	}
	return it, ok
}

func (s *MemoryStore) expiry(ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return s.now().Add(ttl)
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, key string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.get(key); ok {
		return false, nil
	}
	s.items[key] = memItem{value: "1", expires: s.expiry(ttl)}
	return true, nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, key string) error {
	s.mu.Lock()
	delete(s.items, key)
	s.mu.Unlock()
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, key string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.get(key)
	return it.value, ok, nil
}

// Set implements Store.
func (s *MemoryStore) Set(_ context.Context, key, value string, ttl time.Duration) error {
	s.mu.Lock()
	s.items[key] = memItem{value: value, expires: s.expiry(ttl)}
	s.mu.Unlock()
	return nil
}
