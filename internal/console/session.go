package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// sessionCookie holds a session's id; the id itself is never stored, only
// its SHA-256, so reading Redis does not let anyone sign in.
const sessionCookie = "precept_session"

// touchEvery is how often a session in use has its idle deadline moved:
// not on every request.
const touchEvery = time.Minute

// maxUserAgent bounds the browser description kept with a session.
const maxUserAgent = 160

// session is a signed-in browser (docs/console.md, "Sessions").
type session struct {
	// Key is the SHA-256 of the session id in hex.
	Key string `json:"-"`
	// Name is the identity signed in; Digest is the SHA-256 of its token,
	// empty for the local admin of a server without tokens. The role is
	// looked up from the digest at every request, so removing a token
	// from the configuration ends its sessions.
	Name   string `json:"name"`
	Digest string `json:"digest,omitempty"`
	// CSRF is the token every state-changing form must carry.
	CSRF      string    `json:"csrf"`
	Created   time.Time `json:"created"`
	Seen      time.Time `json:"seen"`
	UserAgent string    `json:"user_agent,omitempty"`
	// local marks the local admin's session on a server without tokens,
	// which is not stored.
	local bool
}

// sessions keeps sessions in Redis, each under its own key that expires
// when the session is idle too long, plus a sorted set listing them for
// the sessions page.
type sessions struct {
	redis  redis.UniversalClient
	prefix string
	idle   time.Duration
	max    time.Duration
	// perIdentity bounds one identity's sessions: a sign-in past it ends
	// that identity's oldest.
	perIdentity int
	now         func() time.Time
	log         *slog.Logger
}

var errNoSession = errors.New("no session")

func (s *sessions) key(k string) string { return s.prefix + "session:" + k }
func (s *sessions) index() string       { return s.prefix + "sessions" }

// randomToken returns 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func digest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// create stores a new session and returns its id, for the cookie. When
// the identity already has perIdentity sessions, its oldest end, so that
// one token signing in again and again keeps a bounded number.
func (s *sessions) create(ctx context.Context, name, tokenDigest, userAgent string) (string, *session, error) {
	id := randomToken()
	now := s.now().UTC()
	if len(userAgent) > maxUserAgent {
		userAgent = userAgent[:maxUserAgent]
	}
	sess := &session{Key: digest(id), Name: name, Digest: tokenDigest, CSRF: randomToken(), Created: now, Seen: now, UserAgent: userAgent}
	ended, err := createScript.Run(ctx, s.redis,
		[]string{s.key(sess.Key), s.index(), s.identityIndex(name)},
		mustJSON(sess), s.ttl(sess).Milliseconds(), sess.Key,
		now.Unix(), now.Add(-s.max).Unix(),
		now.UnixMilli(), now.Add(-s.max).UnixMilli(), s.max.Milliseconds(),
		s.perIdentity, s.key("")).Int()
	if err != nil {
		return "", nil, fmt.Errorf("store session: %w", err)
	}
	if ended > 0 {
		s.log.Info("console sessions ended: too many for one identity", "identity", name, "ended", ended, "max", s.perIdentity)
	}
	return id, sess, nil
}

// identityIndex is the sorted set of one identity's sessions, by
// creation time in milliseconds: what the cap counts.
func (s *sessions) identityIndex(name string) string { return s.prefix + "identity:" + name }

// createScript stores a session and keeps its identity under the cap, in
// one step, so concurrent sign-ins of one identity cannot each see room
// and together exceed it. The new session itself is never the one ended.
// Every key shares the prefix, so with Redis Cluster a {hash tag} in
// redis.stream keeps them in one slot.
//
// KEYS: the session, the index of all sessions, the identity's index.
// ARGV: 1 record, 2 TTL ms, 3 session key, 4 now s, 5 oldest alive s,
// 6 now ms, 7 oldest alive ms, 8 max age ms, 9 cap, 10 session key prefix.
// It returns how many of the identity's sessions it ended.
var createScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7])
for _, k in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if redis.call('EXISTS', ARGV[10] .. k) == 0 then
    redis.call('ZREM', KEYS[3], k)
    redis.call('ZREM', KEYS[2], k)
  end
end
local ended = 0
local over = redis.call('ZCARD', KEYS[3]) + 1 - tonumber(ARGV[9])
if over > 0 then
  for _, k in ipairs(redis.call('ZRANGE', KEYS[3], 0, over - 1)) do
    redis.call('DEL', ARGV[10] .. k)
    redis.call('ZREM', KEYS[3], k)
    redis.call('ZREM', KEYS[2], k)
    ended = ended + 1
  end
end
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[8])
return ended
`)

// mustJSON encodes a session: strings and times, which always encode.
func mustJSON(sess *session) []byte {
	data, _ := json.Marshal(sess)
	return data
}

// exists reports whether a session is still stored.
func (s *sessions) exists(ctx context.Context, key string) (bool, error) {
	n, err := s.redis.Exists(ctx, s.key(key)).Result()
	return n == 1, err
}

// ttl is how long a session may stay unused: idle, but never past its
// maximum age.
func (s *sessions) ttl(sess *session) time.Duration {
	left := sess.Created.Add(s.max).Sub(s.now())
	return max(min(s.idle, left), time.Second)
}

// get returns the session with this id; errNoSession when there is none
// or it expired.
func (s *sessions) get(ctx context.Context, id string) (*session, error) {
	if id == "" {
		return nil, errNoSession
	}
	key := digest(id)
	data, err := s.redis.Get(ctx, s.key(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	var sess session
	if err := json.Unmarshal(data, &sess); err != nil {
		return nil, errNoSession
	}
	sess.Key = key
	now := s.now()
	if now.Sub(sess.Created) >= s.max {
		s.revoke(ctx, key)
		return nil, errNoSession
	}
	if now.Sub(sess.Seen) >= touchEvery {
		// Only if it still exists: a revocation racing this request's
		// touch stays a revocation.
		sess.Seen = now.UTC()
		ok, err := s.redis.SetXX(ctx, s.key(key), mustJSON(&sess), s.ttl(&sess)).Result()
		if err != nil {
			return nil, fmt.Errorf("store session: %w", err)
		}
		if !ok {
			return nil, errNoSession
		}
	}
	return &sess, nil
}

// revoke ends a session by its key.
func (s *sessions) revoke(ctx context.Context, key string) error {
	pipe := s.redis.TxPipeline()
	pipe.Del(ctx, s.key(key))
	pipe.ZRem(ctx, s.index(), key)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// listChunk is how many session records one MGET reads.
const listChunk = 500

// list returns the live sessions, newest first, and forgets expired
// ones. It reads them all: the cap per identity bounds them to the
// configured tokens times ui.max_sessions_per_identity.
func (s *sessions) list(ctx context.Context) ([]*session, error) {
	keys, err := s.redis.ZRevRange(ctx, s.index(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []*session
	var gone []any
	for start := 0; start < len(keys); start += listChunk {
		chunk := keys[start:min(start+listChunk, len(keys))]
		full := make([]string, len(chunk))
		for i, k := range chunk {
			full[i] = s.key(k)
		}
		vals, err := s.redis.MGet(ctx, full...).Result()
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		for i, v := range vals {
			str, ok := v.(string)
			var sess session
			if !ok || json.Unmarshal([]byte(str), &sess) != nil {
				gone = append(gone, chunk[i])
				continue
			}
			sess.Key = chunk[i]
			out = append(out, &sess)
		}
	}
	if len(gone) > 0 {
		s.redis.ZRem(ctx, s.index(), gone...)
	}
	return out, nil
}
