package stream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
)

// Fields of a dead-letter entry; the original fields follow as
// fieldPrefix+name.
const (
	dlqReason         = "reason"
	dlqOriginalID     = "original_id"
	dlqStream         = "stream"
	dlqConsumer       = "consumer"
	dlqFailedAt       = "failed_at"
	dlqDeliveries     = "deliveries"
	dlqOriginalBytes  = "original_bytes"
	dlqOriginalFields = "original_fields"
	dlqOriginalSHA256 = "original_sha256"
	dlqTruncated      = "truncated"
	fieldPrefix       = "field:"
)

// Bounds of DeadLetters and of what a dead letter keeps besides the
// original fields (Options.DeadLetterMaxBytes bounds those).
const (
	defaultDeadLetterPage = 50
	maxDeadLetterPage     = 1000
	// maxDeadLetterListBytes bounds the fields and reasons one page
	// carries; a page ends early rather than exceed it.
	maxDeadLetterListBytes = 4 << 20
	// deadLetterChunk is how many entries one read of a page asks Redis
	// for: entries written before dead letters were bounded may be large.
	deadLetterChunk = 8
	// maxReasonBytes bounds a dead letter's reason.
	maxReasonBytes = 4 << 10
	// maxTruncatedName bounds each field name a truncated entry keeps.
	maxTruncatedName = 256
)

// DeadLetter is an entry the consumer could not turn into a stored
// decision, as kept in the dead-letter stream.
type DeadLetter struct {
	// ID is the dead-letter entry's own id.
	ID string
	// OriginalID is the entry's id in the decision stream.
	OriginalID string
	// Reason says why the entry was dead-lettered, naming the fields at
	// fault.
	Reason string
	// Consumer is the consumer that dead-lettered it.
	Consumer string
	// FailedAt is when it was dead-lettered.
	FailedAt time.Time
	// Deliveries is how often the entry had been delivered.
	Deliveries int64
	// Fields are the original fields, byte for byte, in their order; when
	// Truncated, only their beginning.
	Fields []RawField
	// Truncated says Fields are not the whole entry: it was larger than
	// Options.DeadLetterMaxBytes when dead-lettered (then Whole is false
	// too), or when listed, for entries written before dead letters were
	// bounded.
	Truncated bool
	// Whole says the dead-letter stream holds every original field byte
	// for byte, so the entry can be replayed.
	Whole bool
	// OriginalBytes is the size of the original fields, names and values
	// summed (the measure of Limits.MaxEventBytes).
	OriginalBytes int64
	// OriginalFields is how many fields the original entry had.
	OriginalFields int
	// OriginalSHA256 is the SHA-256, in hex, of the original fields: each
	// name and then each value as a netstring ("<length>:<bytes>,"), in
	// order (docs/formats.md).
	OriginalSHA256 string
}

// RawField is one field of a stream entry as received: neither name nor
// value need be valid UTF-8.
type RawField struct {
	Name  []byte
	Value []byte
}

// deadEntry is an entry on its way to the dead-letter stream.
type deadEntry struct {
	msg        redis.XMessage
	deliveries int64
	reason     string
	// logReason is reason without field values, for the log.
	logReason string
}

// reasonReused is the dead-letter reason of an entry whose decision_id
// was stored before with other content.
const reasonReused = "decision_id reused with different content"

// reused returns, as entries to dead-letter, the records the sink did not
// create (created[i] false) whose decision differs from the one stored
// under their decision_id: the id was reused for another decision, and
// the later version must not vanish behind the first. A record equal to
// the stored decision is a redelivery and is not returned.
func (c *Consumer) reused(ctx context.Context, msgs []redis.XMessage, deliveries map[string]int64, records []precept.Feedback, created []bool) ([]deadEntry, error) {
	var dead []deadEntry
	for i, ok := range created {
		if ok {
			continue
		}
		id := records[i].DecisionID
		stored, err := c.sink.Decision(ctx, id)
		if errors.Is(err, precept.ErrNotFound) {
			// The sink just said it holds the decision; without it there
			// is nothing to compare, and a redelivery is the likely case.
			c.log.Warn("a decision the sink reported as stored cannot be read; taken as a redelivery", "decision_id", id, "id", msgs[i].ID)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("compare a decision with the one stored: %w", err)
		}
		same, err := sameDecision(stored, records[i].Decision)
		if err != nil {
			return nil, err
		}
		if same {
			continue
		}
		c.log.Warn(reasonReused+"; dead-lettering the later version", "decision_id", id, "id", msgs[i].ID)
		dead = append(dead, deadEntry{msg: msgs[i], deliveries: max(deliveries[msgs[i].ID], 1), reason: reasonReused, logReason: reasonReused})
	}
	return dead, nil
}

// sameDecision compares two decisions by their JSON encoding, which is
// what the store keeps: times compare by instant and offset, not by
// location pointer.
func sameDecision(a, b precept.Decision) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("compare decisions: %w", err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, fmt.Errorf("compare decisions: %w", err)
	}
	return bytes.Equal(ja, jb), nil
}

// deadLetter copies entries to the dead-letter stream and acknowledges
// them in one MULTI/EXEC.
func (c *Consumer) deadLetter(ctx context.Context, dead []deadEntry) error {
	ids := make([]string, len(dead))
	for i, d := range dead {
		ids[i] = d.msg.ID
	}
	exact, err := c.rawEntries(ctx, ids)
	if err != nil {
		return fmt.Errorf("dead-letter entries: %w", err)
	}
	failedAt := c.opts.Now().UTC().Format(time.RFC3339Nano)
	_, err = c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, d := range dead {
			fields, ok := exact[d.msg.ID]
			if !ok {
				fields = mapFields(d.msg.Values)
			}
			kept, sum := boundFields(fields, c.opts.DeadLetterMaxBytes)
			values := make([]any, 0, 22+2*len(kept))
			values = append(values,
				dlqReason, text.Truncate(d.reason, maxReasonBytes),
				dlqOriginalID, d.msg.ID,
				dlqStream, c.opts.Stream,
				dlqConsumer, c.opts.Consumer,
				dlqFailedAt, failedAt,
				dlqDeliveries, d.deliveries,
				dlqOriginalBytes, sum.bytes,
				dlqOriginalFields, sum.fields,
				dlqOriginalSHA256, sum.sha256,
			)
			if sum.truncated {
				values = append(values, dlqTruncated, "true")
			}
			for _, f := range kept {
				values = append(values, fieldPrefix+string(f.Name), f.Value)
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: c.opts.DeadLetterStream, MaxLen: int64(c.opts.DeadLetterMaxLen), Values: values})
		}
		p.XAck(ctx, c.opts.Stream, c.opts.Group, ids...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dead-letter entries: %w", err)
	}
	c.metrics.decisions.WithLabelValues(resultDeadLetter).Add(float64(len(dead)))
	c.forgetErrors(ids)
	for _, d := range dead {
		c.log.Warn("dead-lettered decision stream entry", "id", d.msg.ID, "deliveries", d.deliveries, "reason", d.logReason)
	}
	return nil
}

// rawEntries reads entries again with XRANGE to copy them exactly: the
// parsed form the client returns is a map, which loses field order and
// repeated names. Entries no longer in the stream are left out.
func (c *Consumer) rawEntries(ctx context.Context, ids []string) (map[string][]RawField, error) {
	cmds := make([]*redis.Cmd, len(ids))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Do(ctx, "XRANGE", c.opts.Stream, id, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("re-read entries: %w", err)
	}
	out := make(map[string][]RawField, len(ids))
	for _, cmd := range cmds {
		entries, err := parseEntries(cmd.Val())
		if err != nil {
			return nil, fmt.Errorf("re-read entries: %w", err)
		}
		for _, e := range entries {
			out[e.id] = e.fields
		}
	}
	return out, nil
}

// mapFields is the fallback copy of an entry's fields, sorted by name.
func mapFields(values map[string]any) []RawField {
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	fields := make([]RawField, len(names))
	for i, name := range names {
		s, _ := fieldString(values[name])
		fields[i] = RawField{Name: []byte(name), Value: []byte(s)}
	}
	return fields
}

// rawEntry is one stream entry as Redis sent it.
type rawEntry struct {
	id     string
	fields []RawField
}

// parseEntries reads an XRANGE / XREVRANGE reply as returned by Do:
// an array of [id, [name, value, …]] (the field list may be nil for an
// entry deleted while pending).
func parseEntries(reply any) ([]rawEntry, error) {
	if reply == nil {
		return nil, nil
	}
	list, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply type %T", reply)
	}
	out := make([]rawEntry, 0, len(list))
	for _, item := range list {
		pair, ok := item.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("unexpected entry %T", item)
		}
		id, ok := pair[0].(string)
		if !ok {
			return nil, fmt.Errorf("unexpected entry id %T", pair[0])
		}
		e := rawEntry{id: id}
		switch fields := pair[1].(type) {
		case nil:
		case []any:
			if len(fields)%2 != 0 {
				return nil, fmt.Errorf("entry %s has an odd number of field names and values", id)
			}
			for i := 0; i < len(fields); i += 2 {
				name, ok1 := fields[i].(string)
				value, ok2 := fields[i+1].(string)
				if !ok1 || !ok2 {
					return nil, fmt.Errorf("entry %s has a field that is not a string", id)
				}
				e.fields = append(e.fields, RawField{Name: []byte(name), Value: []byte(value)})
			}
		default:
			return nil, fmt.Errorf("unexpected fields %T in entry %s", pair[1], id)
		}
		out = append(out, e)
	}
	return out, nil
}

// DeadLetters lists the dead-letter stream newest first. pageSize bounds
// the page (default 50, at most 1000), and so does a budget of 4 MiB of
// fields and reasons; each entry shows at most Options.DeadLetterMaxBytes
// of its fields. pageToken is "" for the first page or the next value of
// the previous call, which is "" after the last page. total is the length
// of the dead-letter stream. A malformed token is a precept.Invalid error.
func (c *Consumer) DeadLetters(ctx context.Context, pageSize int, pageToken string) (letters []DeadLetter, next string, total int64, err error) {
	switch {
	case pageSize <= 0:
		pageSize = defaultDeadLetterPage
	case pageSize > maxDeadLetterPage:
		pageSize = maxDeadLetterPage
	}
	end := "+"
	if pageToken != "" {
		if !entryIDPattern.MatchString(pageToken) {
			return nil, "", 0, precept.Errorf(precept.Invalid, "invalid page token %q", text.Truncate(pageToken, 32))
		}
		end = pageToken
	}
	length, err := c.rdb.XLen(ctx, c.opts.DeadLetterStream).Result()
	if err != nil {
		return nil, "", 0, fmt.Errorf("list dead letters: %w", err)
	}
	budget := maxDeadLetterListBytes
	for {
		// One entry more than the page holds, to know whether another
		// page follows.
		want := min(deadLetterChunk, pageSize+1-len(letters))
		entries, err := c.readDeadLetters(ctx, "XREVRANGE", end, "-", want)
		if err != nil {
			return nil, "", 0, fmt.Errorf("list dead letters: %w", err)
		}
		for _, e := range entries {
			l := c.deadLetterFrom(e)
			size := len(l.Reason)
			for _, f := range l.Fields {
				size += len(f.Name) + len(f.Value)
			}
			if len(letters) == pageSize || (len(letters) > 0 && size > budget) {
				return letters, e.id, length, nil
			}
			budget -= size
			letters = append(letters, l)
		}
		if len(entries) < want {
			return letters, "", length, nil
		}
		end = "(" + entries[len(entries)-1].id
	}
}

// readDeadLetters reads up to count dead letters with XRANGE or
// XREVRANGE between from and to.
func (c *Consumer) readDeadLetters(ctx context.Context, command, from, to string, count int) ([]rawEntry, error) {
	reply, err := c.rdb.Do(ctx, command, c.opts.DeadLetterStream, from, to, "COUNT", count).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	return parseEntries(reply)
}

// deadLetterFrom reads a dead-letter entry for a listing. An entry
// written before dead letters were bounded carries no size or hash: they
// are computed, and its fields are cut to the bound.
func (c *Consumer) deadLetterFrom(e rawEntry) DeadLetter {
	l := parseDeadLetter(e)
	if l.OriginalSHA256 == "" {
		var sum fieldSummary
		l.Fields, sum = boundFields(l.Fields, c.opts.DeadLetterMaxBytes)
		l.OriginalBytes, l.OriginalFields, l.OriginalSHA256, l.Truncated = sum.bytes, sum.fields, sum.sha256, sum.truncated
	}
	return l
}

// parseDeadLetter reads a dead-letter entry as stored; fields it does not
// know are ignored, so older and newer consumers can share the stream.
// An entry written before dead letters were bounded has no
// OriginalSHA256.
func parseDeadLetter(e rawEntry) DeadLetter {
	l := DeadLetter{ID: e.id}
	for _, f := range e.fields {
		name := string(f.Name)
		if orig, ok := strings.CutPrefix(name, fieldPrefix); ok {
			l.Fields = append(l.Fields, RawField{Name: []byte(orig), Value: f.Value})
			continue
		}
		value := string(f.Value)
		switch name {
		case dlqReason:
			l.Reason = text.Truncate(value, maxReasonBytes)
		case dlqOriginalID:
			l.OriginalID = value
		case dlqConsumer:
			l.Consumer = value
		case dlqFailedAt:
			if t, err := time.Parse(time.RFC3339Nano, value); err == nil {
				l.FailedAt = t
			}
		case dlqDeliveries:
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				l.Deliveries = n
			}
		case dlqOriginalBytes:
			if n, err := strconv.ParseInt(value, 10, 64); err == nil {
				l.OriginalBytes = n
			}
		case dlqOriginalFields:
			if n, err := strconv.Atoi(value); err == nil {
				l.OriginalFields = n
			}
		case dlqOriginalSHA256:
			l.OriginalSHA256 = value
		case dlqTruncated:
			l.Truncated = value == "true"
		}
	}
	l.Whole = !l.Truncated
	return l
}

// fieldSummary describes an entry's original fields.
type fieldSummary struct {
	bytes     int64
	fields    int
	sha256    string
	truncated bool
}

// boundFields returns fields as a dead letter keeps them, with what it
// must say about the original. When names and values sum to at most
// maxBytes, every field is kept as is. Otherwise fields are kept in order
// until maxBytes is spent: each name cut to 256 bytes, each value to what
// is left, both on a rune boundary when they are UTF-8.
func boundFields(fields []RawField, maxBytes int) ([]RawField, fieldSummary) {
	h := sha256.New()
	sum := fieldSummary{fields: len(fields)}
	netstring := func(b []byte) {
		h.Write(strconv.AppendInt(nil, int64(len(b)), 10))
		h.Write([]byte{':'})
		h.Write(b)
		h.Write([]byte{','})
	}
	for _, f := range fields {
		sum.bytes += int64(len(f.Name) + len(f.Value))
		netstring(f.Name)
		netstring(f.Value)
	}
	sum.sha256 = hex.EncodeToString(h.Sum(nil))
	if sum.bytes <= int64(maxBytes) {
		return fields, sum
	}
	sum.truncated = true
	var kept []RawField
	left := maxBytes
	for _, f := range fields {
		if left <= 0 {
			break
		}
		name := cut(f.Name, min(maxTruncatedName, left))
		left -= len(name)
		value := cut(f.Value, left)
		left -= len(value)
		kept = append(kept, RawField{Name: name, Value: value})
	}
	return kept, sum
}

// cut returns b's first n bytes at most, backing off to a rune boundary
// when b is UTF-8.
func cut(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	if n > 0 && utf8.Valid(b) {
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
	}
	return b[:n]
}

// logReason is what the log may say about an invalid entry: the fields at
// fault, never their values (reasons quote values).
func logReason(err error) string {
	var v *precept.ValidationError
	if !errors.As(err, &v) {
		return err.Error()
	}
	fields := make([]string, 0, len(v.Problems))
	seen := make(map[string]bool)
	for _, p := range v.Problems {
		if !seen[p.Field] {
			seen[p.Field] = true
			fields = append(fields, p.Field)
		}
	}
	return "invalid decision: problems with " + strings.Join(fields, ", ")
}
