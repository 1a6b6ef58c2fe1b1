package slackapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/feedbackstore"
)

// Keys under which precept kept clarification conversations in the Store
// before they moved to the feedback repository: where a conversation
// stood, its replies in order, and the decision a thread asked about.
const (
	legacyConversationKey = "conversation:"
	legacyRepliesKey      = "replies:"
	legacyThreadKey       = "thread:"
)

// legacyConversation is a clarification conversation as an older
// precept kept it in the Store.
type legacyConversation struct {
	DecisionID string `json:"-"`
	Thread     string `json:"thread"`
	Attempts   int    `json:"attempts"`
	// AskedAt is when the last question was asked.
	AskedAt time.Time     `json:"asked_at"`
	Status  string        `json:"status"`
	Replies []legacyReply `json:"-"`
}

// legacyReply is one entry of an older precept's shared reply log.
type legacyReply struct {
	TS     string `json:"ts"`
	User   string `json:"user"`
	Text   string `json:"text"`
	Absorb bool   `json:"absorb,omitempty"`
}

// record is the conversation as a clarification record: every question
// up to its attempts (only the last one's time was kept), its replies in
// the order the log had them, its thread and status.
func (c legacyConversation) record() feedbackstore.Clarification {
	rec := feedbackstore.Clarification{DecisionID: c.DecisionID, Thread: c.Thread, Status: c.Status}
	for n := 1; n <= c.Attempts; n++ {
		q := feedbackstore.Question{Attempt: n}
		if n == 1 {
			q.Kind = clarification.KindFirst
		}
		if n == c.Attempts {
			q.AskedAt = c.AskedAt.UTC()
		}
		rec.Questions = append(rec.Questions, q)
	}
	for _, r := range c.Replies {
		rec.Replies = append(rec.Replies, feedbackstore.Reply{TS: r.TS, User: r.User, Text: r.Text, Absorbed: r.Absorb})
	}
	return rec
}

// legacyStore is a Store that may still hold conversations an older
// precept kept there.
type legacyStore interface {
	// legacyConversations returns the conversations the Store holds.
	legacyConversations(ctx context.Context) ([]legacyConversation, error)
	// dropLegacy deletes a conversation's keys.
	dropLegacy(ctx context.Context, c legacyConversation) error
}

var _ legacyStore = (*RedisStore)(nil)

// importLegacy moves the clarification conversations an older precept
// kept in the Store into the feedback repository, then deletes them from
// the Store. It is best effort: what fails stays in the Store, is logged
// and is tried again at the next start; importing a conversation twice
// records nothing twice.
func (c *clarifier) importLegacy(ctx context.Context) {
	ls, ok := c.s.store.(legacyStore)
	if !ok {
		return
	}
	// The scan walks Redis's whole keyspace; once an import finished
	// without failures, later starts skip it. Losing the marker costs one
	// scan more.
	if _, done, err := c.s.store.Get(ctx, keyLegacyImported); err == nil && done {
		return
	}
	convs, err := ls.legacyConversations(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.s.log.Warn("look for clarification conversations an older precept kept in Redis; will look again at the next start", "err", err)
		}
		return
	}
	imported, failed := 0, 0
	for _, conv := range convs {
		if ctx.Err() != nil {
			return
		}
		if _, err := c.clar.Import(ctx, conv.record()); err != nil {
			c.s.log.Warn("import a clarification conversation from Redis; it stays there for the next start", "decision_id", conv.DecisionID, "err", err)
			failed++
			continue
		}
		if err := ls.dropLegacy(ctx, conv); err != nil {
			c.s.log.Warn("delete an imported clarification conversation from Redis", "decision_id", conv.DecisionID, "err", err)
			failed++
		}
		imported++
	}
	if imported > 0 {
		c.s.log.Info("imported clarification conversations from Redis into the feedback repository", "conversations", imported)
	}
	if failed == 0 {
		if err := c.s.store.Set(ctx, keyLegacyImported, "1", 0); err != nil {
			c.s.log.Warn("remember that the Redis conversations were imported", "err", err)
		}
	}
}

// legacyConversations implements legacyStore: it scans the prefix for
// the three kinds of keys and gathers them by decision.
func (s *RedisStore) legacyConversations(ctx context.Context) ([]legacyConversation, error) {
	byID := map[string]*legacyConversation{}
	get := func(id string) *legacyConversation {
		c, ok := byID[id]
		if !ok {
			c = &legacyConversation{DecisionID: id}
			byID[id] = c
		}
		return c
	}
	threads, err := s.scan(ctx, legacyThreadKey)
	if err != nil {
		return nil, err
	}
	for _, thread := range threads {
		id, err := s.rdb.Get(ctx, s.prefix+legacyThreadKey+thread).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s%s: %w", legacyThreadKey, thread, err)
		}
		get(id).Thread = thread
	}
	ids, err := s.scan(ctx, legacyConversationKey)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		v, err := s.rdb.Get(ctx, s.prefix+legacyConversationKey+id).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s%s: %w", legacyConversationKey, id, err)
		}
		c := get(id)
		thread := c.Thread
		if err := json.Unmarshal([]byte(v), c); err != nil {
			return nil, fmt.Errorf("decode %s%s: %w", legacyConversationKey, id, err)
		}
		if c.Thread == "" {
			c.Thread = thread
		}
	}
	if ids, err = s.scan(ctx, legacyRepliesKey); err != nil {
		return nil, err
	}
	for _, id := range ids {
		raw, err := s.rdb.LRange(ctx, s.prefix+legacyRepliesKey+id, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("read %s%s: %w", legacyRepliesKey, id, err)
		}
		c := get(id)
		for _, item := range raw {
			var r legacyReply
			if err := json.Unmarshal([]byte(item), &r); err != nil {
				return nil, fmt.Errorf("decode a reply of %s: %w", id, err)
			}
			c.Replies = append(c.Replies, r)
		}
	}
	out := make([]legacyConversation, 0, len(byID))
	for _, c := range byID {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DecisionID < out[j].DecisionID })
	return out, nil
}

// scan returns the rest of every key under the prefix that starts with
// kind.
func (s *RedisStore) scan(ctx context.Context, kind string) ([]string, error) {
	pattern := globEscape(s.prefix+kind) + "*"
	var out []string
	iter := s.rdb.Scan(ctx, 0, pattern, 200).Iterator()
	for iter.Next(ctx) {
		out = append(out, strings.TrimPrefix(iter.Val(), s.prefix+kind))
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("scan %s keys: %w", kind, err)
	}
	return out, nil
}

// dropLegacy implements legacyStore.
func (s *RedisStore) dropLegacy(ctx context.Context, c legacyConversation) error {
	keys := []string{s.prefix + legacyConversationKey + c.DecisionID, s.prefix + legacyRepliesKey + c.DecisionID}
	if c.Thread != "" {
		keys = append(keys, s.prefix+legacyThreadKey+c.Thread)
	}
	if err := s.rdb.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("delete the conversation of %s: %w", c.DecisionID, err)
	}
	return nil
}

// globEscape quotes the characters Redis's MATCH patterns treat
// specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
