package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
)

// emit prints a response as JSON with -o json (enum values by their plain
// names, see marshalJSON), or calls text otherwise. Whatever text writes
// goes through c.stdout, which shows control characters escaped.
func (c *cli) emit(msg proto.Message, text func(w io.Writer)) error {
	if c.output == "json" {
		b, err := marshalJSON(msg, true)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.stdout, string(b))
		return err
	}
	text(c.stdout)
	return nil
}

// escapeWriter shows the control characters of what is written to it
// escaped (safetext.Escape), so that no stored field — a comment, a rule,
// a reason — can clear a screen, move the cursor or overwrite a line.
// Line feeds and tabs pass: the CLI's own layout uses them. A character
// split across two writes is held until the rest arrives.
type escapeWriter struct {
	w       io.Writer
	pending []byte
}

func (e *escapeWriter) Write(p []byte) (int, error) {
	buf := append(e.pending, p...)
	e.pending = nil
	if tail := incompleteTail(buf); tail > 0 {
		e.pending = append([]byte(nil), buf[len(buf)-tail:]...)
		buf = buf[:len(buf)-tail]
	}
	if _, err := io.WriteString(e.w, safetext.Escape(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held back, escaped.
func (e *escapeWriter) Flush() error {
	if len(e.pending) == 0 {
		return nil
	}
	_, err := io.WriteString(e.w, safetext.Escape(string(e.pending)))
	e.pending = nil
	return err
}

// incompleteTail returns the length of the start of a UTF-8 sequence at
// the end of b that more bytes may complete, or 0.
func incompleteTail(b []byte) int {
	for n := 1; n < utf8.UTFMax && n <= len(b); n++ {
		c := b[len(b)-n]
		if c < utf8.RuneSelf {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-n:]) {
				return 0
			}
			return n
		}
	}
	return 0
}

// table writes aligned columns; each cell is shown on one line.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = safetext.EscapeLine(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// fields writes "label  value" lines, skipping empty values. The further
// lines of a value are indented under its first, so no value can start a
// line of its own.
func fields(w io.Writer, pairs ...string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			continue
		}
		for j, line := range strings.Split(strings.TrimRight(safetext.Escape(pairs[i+1]), "\n"), "\n") {
			label := pairs[i]
			if j > 0 {
				label = ""
			}
			fmt.Fprintf(tw, "%s\t%s\n", label, strings.ReplaceAll(line, "\t", " "))
		}
	}
	tw.Flush()
}

// line shows a value on one line: its line breaks and control characters
// escaped.
func line(s string) string { return safetext.EscapeLine(s) }

func ts(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// clip shortens text to n runes on one line, the ellipsis included.
func clip(s string, n int) string { return text.Fit(text.OneLine(s), n) }

// printable shows raw bytes as text when they are UTF-8, quoted otherwise.
func printable(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
