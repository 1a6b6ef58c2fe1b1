package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
)

// AuditSuffix names the stream that records every replay and drop of a
// dead letter: the dead-letter stream's name with this appended, so it
// shares the dead-letter stream's {hash tag} (docs/formats.md).
const AuditSuffix = ":audit"

// auditMaxLen bounds the audit stream; at about 300 bytes a record it
// holds 30 MB at most. Trimming is approximate, to whole radix-tree
// nodes, so the newest records are never the ones lost.
const auditMaxLen = 100000

// maxActionAttempts bounds how often an action on one dead letter is
// retried when the dead-letter stream changed while it was read.
const maxActionAttempts = 5

// The actions on dead letters, as the audit stream records them.
const (
	ActionReplay = "replay"
	ActionDrop   = "drop"
)

// Outcome is what became of one dead letter named in a replay or a drop.
type Outcome struct {
	// ID is the dead letter's id.
	ID string
	// StreamID is the id a replayed entry got in the decision stream.
	StreamID string
	// Err says why nothing was done to this dead letter: a *precept.Error
	// (NotFound, FailedPrecondition) whose message is safe to show.
	Err error
}

// ReplayDeadLetters re-queues dead letters onto the decision stream, each
// as a new entry with its original fields in their order, and removes
// them from the dead-letter stream; the consumer then reads them like
// any entry, so a replay of an entry whose cause was fixed stores it, and
// one whose cause remains dead-letters it again. Entries kept truncated
// cannot be replayed. by is who asked: each replay is logged and recorded
// in the audit stream in the transaction that does it. The error is for
// the request as a whole (precept.Invalid for bad ids, or Redis failing);
// each id's own result is in its Outcome.
func (c *Consumer) ReplayDeadLetters(ctx context.Context, ids []string, by string) ([]Outcome, error) {
	return c.actOnDeadLetters(ctx, ActionReplay, ids, by)
}

// DropDeadLetters removes dead letters for good, logging each drop and
// recording it in the audit stream in the same transaction. Errors are as
// for ReplayDeadLetters.
func (c *Consumer) DropDeadLetters(ctx context.Context, ids []string, by string) ([]Outcome, error) {
	return c.actOnDeadLetters(ctx, ActionDrop, ids, by)
}

func (c *Consumer) actOnDeadLetters(ctx context.Context, action string, ids []string, by string) ([]Outcome, error) {
	switch {
	case len(ids) == 0:
		return nil, precept.Errorf(precept.Invalid, "ids: name at least one dead letter")
	case len(ids) > maxDeadLetterPage:
		return nil, precept.Errorf(precept.Invalid, "ids: %d dead letters, at most %d at once", len(ids), maxDeadLetterPage)
	case strings.TrimSpace(by) == "":
		return nil, errors.New("act on dead letters: who asked is required for the audit")
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !entryIDPattern.MatchString(id) || !strings.Contains(id, "-") {
			return nil, precept.Errorf(precept.Invalid, "ids: %q is not a dead-letter id (e.g. 1714560000000-0)", text.Truncate(id, 32))
		}
		if seen[id] {
			return nil, precept.Errorf(precept.Invalid, "ids: %s is named twice", id)
		}
		seen[id] = true
	}
	out := make([]Outcome, len(ids))
	for i, id := range ids {
		o, err := c.actOn(ctx, action, id, by)
		if err != nil {
			return nil, fmt.Errorf("%s dead letter %s: %w", action, id, err)
		}
		out[i] = o
	}
	return out, nil
}

// actOn replays or drops one dead letter. Under WATCH of the dead-letter
// stream it reads the entry, then in one MULTI/EXEC re-adds it to the
// decision stream (replay), deletes it and adds the audit record; a
// change to the dead-letter stream in between (another replay, a new dead
// letter) makes it start again, so no entry is replayed twice.
func (c *Consumer) actOn(ctx context.Context, action, id, by string) (Outcome, error) {
	o := Outcome{ID: id}
	dlq := c.opts.DeadLetterStream
	for range maxActionAttempts {
		var added *redis.StringCmd
		var letter DeadLetter
		err := c.rdb.Watch(ctx, func(tx *redis.Tx) error {
			reply, err := tx.Do(ctx, "XRANGE", dlq, id, id).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			entries, err := parseEntries(reply)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				o.Err = precept.Errorf(precept.NotFound, "dead letter %s does not exist (replayed, dropped or trimmed already?)", id)
				return nil
			}
			letter = parseDeadLetter(entries[0])
			if letter.OriginalSHA256 == "" {
				_, sum := boundFields(letter.Fields, math.MaxInt)
				letter.OriginalBytes, letter.OriginalSHA256 = sum.bytes, sum.sha256
			}
			if action == ActionReplay {
				switch {
				case !letter.Whole:
					o.Err = precept.Errorf(precept.FailedPrecondition, "dead letter %s was kept truncated (%d bytes originally, more than the bound); it cannot be replayed, only dropped", id, letter.OriginalBytes)
					return nil
				case len(letter.Fields) == 0:
					o.Err = precept.Errorf(precept.FailedPrecondition, "dead letter %s kept no fields (its entry was deleted before it was read); it cannot be replayed, only dropped", id)
					return nil
				}
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if action == ActionReplay {
					values := make([]any, 0, 2*len(letter.Fields))
					for _, f := range letter.Fields {
						values = append(values, f.Name, f.Value)
					}
					added = p.XAdd(ctx, &redis.XAddArgs{Stream: c.opts.Stream, Values: values})
				}
				p.XDel(ctx, dlq, id)
				p.XAdd(ctx, &redis.XAddArgs{Stream: dlq + AuditSuffix, MaxLen: auditMaxLen, Approx: true, Values: []any{
					"action", action,
					"by", by,
					"at", c.opts.Now().UTC().Format(time.RFC3339Nano),
					"dead_letter_id", id,
					"original_id", letter.OriginalID,
					"reason", text.Truncate(letter.Reason, 512),
					dlqOriginalBytes, letter.OriginalBytes,
					dlqOriginalSHA256, letter.OriginalSHA256,
				}})
				return nil
			})
			return err
		}, dlq)
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue
		case err != nil:
			return o, err
		case o.Err != nil:
			return o, nil
		}
		if added != nil {
			o.StreamID = added.Val()
		}
		c.log.Info("dead letter "+map[string]string{ActionReplay: "replayed", ActionDrop: "dropped"}[action], "by", by, "dead_letter_id", id, "original_id", letter.OriginalID, "stream_id", o.StreamID)
		return o, nil
	}
	return o, precept.Errorf(precept.Unavailable, "the dead-letter stream kept changing; try again")
}

// trimDeadLetters drops dead letters older than DeadLetterMaxAge, by the
// Redis server's clock (which stamped their ids), and all but the newest
// DeadLetterMaxLen. It returns how many it dropped.
func (c *Consumer) trimDeadLetters(ctx context.Context) (int64, error) {
	now, err := c.rdb.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("trim dead letters: %w", err)
	}
	minID := strconv.FormatInt(now.Add(-c.opts.DeadLetterMaxAge).UnixMilli(), 10) + "-0"
	var byAge, byLen *redis.IntCmd
	_, err = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		byAge = p.XTrimMinID(ctx, c.opts.DeadLetterStream, minID)
		byLen = p.XTrimMaxLen(ctx, c.opts.DeadLetterStream, int64(c.opts.DeadLetterMaxLen))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("trim dead letters: %w", err)
	}
	n := byAge.Val() + byLen.Val()
	if n > 0 {
		c.log.Info("trimmed dead letters", "by_age", byAge.Val(), "by_length", byLen.Val(), "max_age", c.opts.DeadLetterMaxAge, "max_length", c.opts.DeadLetterMaxLen)
	}
	return n, nil
}
