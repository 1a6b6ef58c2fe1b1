package stream

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
)

// Defaults for Options fields left zero.
const (
	DefaultStream        = "asdlc:events:hitl_decisions"
	DefaultGroup         = "precept-evaluator"
	DefaultStartID       = "0"
	DefaultBatchSize     = 500
	DefaultBlock         = time.Second
	DefaultClaimIdle     = 60 * time.Second
	DefaultClaimInterval = 5 * time.Second
	DefaultMaxDeliveries = 5
	DefaultMaxInFlight   = 2
	DefaultStopTimeout   = 10 * time.Second
)

// Defaults bounding the dead-letter stream (docs/thresholds.md).
const (
	// DefaultDeadLetterMaxBytes bounds the original fields a dead letter
	// keeps, names and values summed; a larger entry is kept truncated,
	// with its size and SHA-256.
	DefaultDeadLetterMaxBytes = 64 << 10
	// DefaultDeadLetterMaxLen is how many dead letters are kept, newest
	// first.
	DefaultDeadLetterMaxLen = 10000
	// DefaultDeadLetterMaxAge is how long a dead letter is kept.
	DefaultDeadLetterMaxAge = 30 * 24 * time.Hour
)

// DeadLetterSuffix names the dead-letter stream after the stream it
// serves: Stream+DeadLetterSuffix unless one is given.
const DeadLetterSuffix = ":dlq"

// Options configure a Consumer. Zero values mean the defaults above;
// Consumer is required.
type Options struct {
	// Stream is the decision stream; default DefaultStream.
	Stream string
	// Group is the consumer group all replicas share; default DefaultGroup.
	Group string
	// Consumer names this replica within the group. It must be unique per
	// running replica and stable across its restarts, so a restarted
	// replica finds the entries it left pending.
	Consumer string
	// DeadLetterStream receives invalid entries; default Stream+":dlq".
	DeadLetterStream string
	// StartID is where a newly created group starts reading: "0" for the
	// whole stream (the default), "$" for new entries only, or an entry id.
	StartID string
	// BatchSize is the XREADGROUP COUNT and the most records handed to one
	// Sink.Store call; default 500.
	BatchSize int
	// Block is how long one XREADGROUP waits for new entries; default 1s.
	// It also bounds how long Run takes to notice cancellation.
	Block time.Duration
	// ClaimIdle is how long an entry must have been pending with another
	// consumer before this one claims it; default 60s.
	ClaimIdle time.Duration
	// ClaimInterval is how often to look for such entries; default 5s.
	ClaimInterval time.Duration
	// MaxDeliveries is how many deliveries an entry may have; one delivered
	// more often is dead-lettered. Default 5.
	MaxDeliveries int
	// MaxInFlight is how many batches may be in Sink.Store at once;
	// default 2.
	MaxInFlight int
	// DeadLetterMaxBytes bounds the original fields one dead letter keeps
	// (names and values summed); a larger entry keeps its first bytes,
	// its size and its SHA-256, and cannot be replayed. Default 64 KiB.
	DeadLetterMaxBytes int
	// DeadLetterMaxLen is how many dead letters the stream keeps; default
	// 10000.
	DeadLetterMaxLen int
	// DeadLetterMaxAge is how long dead letters are kept, by the Redis
	// server's clock; default 30 days.
	DeadLetterMaxAge time.Duration
	// StopTimeout bounds how long Run, once its context is cancelled, waits
	// for batches already read to be stored and acknowledged; default 10s.
	StopTimeout time.Duration
	// Limits bound each decision; zero fields mean precept.DefaultLimits.
	// MaxEventBytes applies to the summed size of an entry's field names
	// and values.
	Limits precept.Limits
	// Logger receives warnings about dead letters and failures; default
	// discards.
	Logger *slog.Logger
	// Registerer, when not nil, receives the consumer's metrics.
	Registerer prometheus.Registerer
	// Now is the clock for received_at and the future-timestamp check;
	// default time.Now.
	Now func() time.Time
}

// entryIDPattern matches an explicit stream entry id.
var entryIDPattern = regexp.MustCompile(`^[0-9]+(-[0-9]+)?$`)

// withDefaults validates o and returns it with every default filled in.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	if o.DeadLetterStream == "" {
		o.DeadLetterStream = o.Stream + DeadLetterSuffix
	}
	if o.DeadLetterStream == o.Stream {
		bad("dead-letter stream must differ from the stream %q", o.Stream)
	}
	if strings.TrimSpace(o.Consumer) == "" {
		bad("consumer is required: a name unique to this replica")
	}
	if o.StartID == "" {
		o.StartID = DefaultStartID
	}
	if o.StartID != "$" && !entryIDPattern.MatchString(o.StartID) {
		bad("start id %q must be \"0\", \"$\" or an entry id", o.StartID)
	}
	positive := func(name string, v *int, def int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			bad("%s must not be negative, got %d", name, *v)
		}
	}
	positive("batch size", &o.BatchSize, DefaultBatchSize)
	positive("max deliveries", &o.MaxDeliveries, DefaultMaxDeliveries)
	positive("max in flight", &o.MaxInFlight, DefaultMaxInFlight)
	positive("dead-letter max bytes", &o.DeadLetterMaxBytes, DefaultDeadLetterMaxBytes)
	positive("dead-letter max length", &o.DeadLetterMaxLen, DefaultDeadLetterMaxLen)
	duration := func(name string, v *time.Duration, def time.Duration) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			bad("%s must not be negative, got %s", name, *v)
		}
	}
	duration("block", &o.Block, DefaultBlock)
	if o.Block > 0 && o.Block < time.Millisecond {
		bad("block must be at least 1ms, got %s", o.Block)
	}
	duration("claim idle", &o.ClaimIdle, DefaultClaimIdle)
	duration("claim interval", &o.ClaimInterval, DefaultClaimInterval)
	duration("stop timeout", &o.StopTimeout, DefaultStopTimeout)
	duration("dead-letter max age", &o.DeadLetterMaxAge, DefaultDeadLetterMaxAge)
	if o.Limits.MaxEventBytes <= 0 {
		o.Limits.MaxEventBytes = precept.DefaultLimits().MaxEventBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("validate stream options: %w", err)
	}
	return o, nil
}

// checkSameSlot refuses stream names a sharded client would put on
// different nodes: the dead-letter XADD and the XACK share a transaction.
func checkSameSlot(rdb redis.UniversalClient, stream, deadLetters string) error {
	switch rdb.(type) {
	case *redis.ClusterClient, *redis.Ring:
	default:
		return nil
	}
	if tag := hashTag(stream); tag == stream || tag != hashTag(deadLetters) {
		return fmt.Errorf("validate stream options: with a sharded Redis the stream %q and the dead-letter stream %q must share a {hash tag}", stream, deadLetters)
	}
	return nil
}

// hashTag returns the part of key Redis Cluster hashes: the text inside
// the first non-empty {…}, or the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}
