package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/precept-dev/precept/internal/config"
)

// maxLogLine is the bound a log line must keep whatever it is given.
const maxLogLine = 4096

// hugeRecord logs everything an attacker could make a log line carry:
// a long message, long strings and errors, a group and a record with
// thousands of attributes, a long list, deep nesting, and control
// characters that escaping makes longer.
func hugeRecord(log *slog.Logger) {
	many := make([]any, 0, 20000)
	for i := range 10000 {
		many = append(many, fmt.Sprintf("unknown_field_%05d", i), "x")
	}
	list := make([]string, 10000)
	for i := range list {
		list[i] = fmt.Sprintf("item-%d", i)
	}
	deep := slog.String("leaf", "x")
	for i := range 50 {
		deep = slog.Group(fmt.Sprintf("g%d", i), deep)
	}
	log = log.With("component", strings.Repeat("c", 100000), strings.Repeat("k", 5000), "v")
	log.WithGroup(strings.Repeat("w", 5000)).Warn(strings.Repeat("m", 100000),
		append([]any{
			"entry", strings.Repeat("e", 1<<20),
			"controls", strings.Repeat("\x1b\x00\"", 10000),
			"err", errors.New(strings.Repeat("r", 100000)),
			slog.Group("fields", many...),
			"list", list,
			deep,
		}, many...)...)
}

func TestLogLinesStayBoundedWhateverTheyAreGiven(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			hugeRecord(NewLogger(&buf, config.Log{Level: "info", Format: format}))
			line := strings.TrimSuffix(buf.String(), "\n")
			if strings.Contains(line, "\n") {
				t.Fatalf("one record gave several lines")
			}
			if len(line) > maxLogLine {
				t.Fatalf("log line of %d bytes, want at most %d: %.300s…", len(line), maxLogLine, line)
			}
			t.Logf("the huge record gave a line of %d bytes", len(line))
			if format == "json" && !json.Valid([]byte(line)) {
				t.Fatalf("clipped line is not valid JSON: %s", line)
			}
			for _, want := range []string{"unknown_field_00000", "entry", "eeee", "rrrr", "clipped", "more attributes"} {
				if !strings.Contains(line, want) {
					t.Errorf("line lacks %q: %s", want, line)
				}
			}
		})
	}
}

// TestOrdinaryLogLinesAreUnchanged: the bound changes nothing in the
// lines preceptd writes every day.
func TestOrdinaryLogLinesAreUnchanged(t *testing.T) {
	stamp := regexp.MustCompile(`^time=\S+ |"time":"[^"]*",`)
	for _, format := range []string{"json", "text"} {
		var got, want bytes.Buffer
		log := func(l *slog.Logger) {
			l = l.With("component", "stream")
			l.Warn("dead-lettered decision stream entry", "id", "1700000000000-0", "deliveries", 1,
				"reason", "invalid decision: problems with decision_id", "err", errors.New("connection refused"),
				"tags", []string{"a", "b"}, slog.Group("batch", "entries", 500, "took", "12ms"))
		}
		log(NewLogger(&got, config.Log{Level: "info", Format: format}))
		opts := &slog.HandlerOptions{Level: slog.LevelInfo}
		if format == "json" {
			log(slog.New(slog.NewJSONHandler(&want, opts)))
		} else {
			log(slog.New(slog.NewTextHandler(&want, opts)))
		}
		if g, w := stamp.ReplaceAllString(got.String(), ""), stamp.ReplaceAllString(want.String(), ""); g != w {
			t.Errorf("%s: bounded handler wrote\n%s\nwant\n%s", format, g, w)
		}
	}
}
