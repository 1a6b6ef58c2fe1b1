package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"unicode/utf8"

	"github.com/precept-dev/precept/internal/config"
)

// NewLogger returns the structured logger the configuration asks for. Its
// lines are bounded (boundedHandler): what a log site is given often
// comes from a request or a stream entry.
func NewLogger(w io.Writer, c config.Log) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(newBoundedHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(newBoundedHandler(slog.NewTextHandler(w, opts)))
}

// The bounds of one log line (docs/thresholds.md). Sizes are weighed as
// written: a byte that JSON or text output escapes weighs 6. With them a
// line stays under 4 KiB in either format.
const (
	// logValueBytes bounds the message and each value.
	logValueBytes = 512
	// logKeyBytes bounds each key and group name.
	logKeyBytes = 64
	// logAttrs bounds the attributes kept in a record and in each group.
	logAttrs = 32
	// logDepth bounds how deep groups nest.
	logDepth = 4
	// logLineBytes bounds the keys and values of one line together,
	// attributes added with Logger.With included.
	logLineBytes = 3072
)

// boundedHandler clips what a record carries before the next handler
// writes it: long strings, errors and values are cut with a note of their
// size, groups and records keep their first logAttrs attributes and count
// the rest, and the whole line has a budget. The output stays valid JSON
// or text, since only values change. Ordinary records pass unchanged.
type boundedHandler struct {
	next slog.Handler
	// used is what attributes from WithAttrs take of every line's budget;
	// prefix is the weight of the group names text output repeats in
	// every key.
	used, prefix int
}

var _ slog.Handler = (*boundedHandler)(nil)

func newBoundedHandler(next slog.Handler) *boundedHandler { return &boundedHandler{next: next} }

func (h *boundedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *boundedHandler) Handle(ctx context.Context, r slog.Record) error {
	b := &logBudget{left: logLineBytes - h.used, prefix: h.prefix}
	out := slog.NewRecord(r.Time, r.Level, clip(r.Message, logValueBytes), r.PC)
	kept := make([]slog.Attr, 0, min(r.NumAttrs(), logAttrs))
	more := 0
	r.Attrs(func(a slog.Attr) bool {
		if len(kept) < logAttrs {
			kept = append(kept, a)
		} else {
			more++
		}
		return true
	})
	out.AddAttrs(b.attrs(kept, more, 0)...)
	return h.next.Handle(ctx, out)
}

func (h *boundedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	b := &logBudget{left: logLineBytes - h.used, prefix: h.prefix}
	more := 0
	if len(attrs) > logAttrs {
		attrs, more = attrs[:logAttrs], len(attrs)-logAttrs
	}
	clipped := b.attrs(attrs, more, 0)
	return &boundedHandler{next: h.next.WithAttrs(clipped), used: logLineBytes - b.left, prefix: h.prefix}
}

func (h *boundedHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	name = clip(name, logKeyBytes)
	return &boundedHandler{next: h.next.WithGroup(name), used: h.used + weigh(name) + 4, prefix: h.prefix + weigh(name) + 1}
}

// logBudget is what is left of one line's budget.
type logBudget struct {
	left int
	// prefix is the weight of the group names before every key.
	prefix int
}

// attrs clips a list of attributes; more counts those already left out,
// and a last attribute says how many were.
func (b *logBudget) attrs(in []slog.Attr, more, depth int) []slog.Attr {
	out := make([]slog.Attr, 0, len(in)+1)
	for _, a := range in {
		a.Value = a.Value.Resolve()
		if a.Equal(slog.Attr{}) {
			continue
		}
		// Keep an attribute only if its key and a useful part of its
		// value fit.
		if len(out) == logAttrs || b.left-b.prefix-weigh(clip(a.Key, logKeyBytes)) < 64 {
			more++
			continue
		}
		out = append(out, b.attr(a, depth))
	}
	if more > 0 {
		out = append(out, slog.String("clipped", fmt.Sprintf("%d more attributes", more)))
	}
	return out
}

// attr clips one attribute and charges it to the budget.
func (b *logBudget) attr(a slog.Attr, depth int) slog.Attr {
	a.Key = clip(a.Key, logKeyBytes)
	// Separators and quotes: ,"key":"value" in JSON.
	b.left -= b.prefix + weigh(a.Key) + 6
	v := a.Value
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, b.value(v.String()))
	case slog.KindGroup:
		if depth >= logDepth {
			return slog.String(a.Key, fmt.Sprintf("[clipped: groups nested deeper than %d]", logDepth))
		}
		group := v.Group()
		more := 0
		if len(group) > logAttrs {
			group, more = group[:logAttrs], len(group)-logAttrs
		}
		inner := &logBudget{left: b.left, prefix: b.prefix + weigh(a.Key) + 1}
		attrs := inner.attrs(group, more, depth+1)
		b.left = inner.left
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(attrs...)}
	case slog.KindAny:
		var s string
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprintf("%+v", v.Any())
		}
		// JSON output can be twice as long as %+v (quotes and commas
		// around every element of a list).
		if w := 2 * weigh(s); w <= logValueBytes && w <= b.left {
			b.left -= w
			return a
		}
		return slog.String(a.Key, b.value(s))
	}
	// Numbers, booleans, times and durations.
	b.left -= 40
	return a
}

// value clips a value to what the budget allows and charges it.
func (b *logBudget) value(s string) string {
	c := clip(s, max(min(logValueBytes, b.left), 0))
	b.left -= weigh(c)
	return c
}

// clip cuts s to a weight of at most n and says how long it was.
func clip(s string, n int) string {
	if weigh(s) <= n {
		return s
	}
	note := fmt.Sprintf("…(%d bytes, clipped)", len(s))
	n -= weigh(note)
	w := 0
	for i, r := range s {
		w += runeWeight(r)
		if w > n {
			return s[:i] + note
		}
	}
	return s + note
}

// weigh is the size of s as a log handler writes it, at most.
func weigh(s string) int {
	w := 0
	for _, r := range s {
		w += runeWeight(r)
	}
	return w
}

func runeWeight(r rune) int {
	switch {
	case r < 0x20, r == '"', r == '\\', r == 0x7f, r == utf8.RuneError, r == '\u2028', r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
}
