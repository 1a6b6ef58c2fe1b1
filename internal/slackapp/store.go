package slackapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store keeps what the replicas of preceptd share about Slack and may
// lose: signed requests and events already seen, claims that keep two
// replicas from doing at the same moment what one should do (post a
// proposal, ask a question), and where proposals were posted. Nothing in
// it is the only copy of anything: clarification conversations live in
// the feedback repository (docs/clarification.md). Replicas share Redis,
// so RedisStore is the Store.
type Store interface {
	// Claim records key for ttl unless it is recorded already, and reports
	// whether this call recorded it.
	Claim(ctx context.Context, key string, ttl time.Duration) (bool, error)
	// Release drops key, so that what it claimed may be tried again.
	Release(ctx context.Context, key string) error
	// Get returns the value at key; ok is false when there is none.
	Get(ctx context.Context, key string) (value string, ok bool, err error)
	// Set stores value at key for ttl.
	Set(ctx context.Context, key, value string, ttl time.Duration) error
}

// RedisStore is a Store in Redis, under a key prefix.
type RedisStore struct {
	rdb    redis.UniversalClient
	prefix string
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a Store keeping its keys in rdb under prefix
// (e.g. "precept:slack:").
func NewRedisStore(rdb redis.UniversalClient, prefix string) *RedisStore {
	return &RedisStore{rdb: rdb, prefix: prefix}
}

// Claim implements Store with SET NX PX.
func (s *RedisStore) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.prefix+key, 1, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", key, err)
	}
	return ok, nil
}

// Release implements Store.
func (s *RedisStore) Release(ctx context.Context, key string) error {
	if err := s.rdb.Del(ctx, s.prefix+key).Err(); err != nil {
		return fmt.Errorf("release %s: %w", key, err)
	}
	return nil
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, key string) (string, bool, error) {
	v, err := s.rdb.Get(ctx, s.prefix+key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("get %s: %w", key, err)
	}
	return v, true, nil
}

// Set implements Store.
func (s *RedisStore) Set(ctx context.Context, key, value string, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, s.prefix+key, value, ttl).Err(); err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	return nil
}
