package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept/internal/text"
)

// emit prints a response as JSON with -o json, or calls text otherwise.
func (c *cli) emit(msg proto.Message, text func(w io.Writer)) error {
	if c.output == "json" {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true}.Marshal(msg)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.stdout, string(b))
		return err
	}
	text(c.stdout)
	return nil
}

// table writes aligned columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// fields writes "label  value" lines, skipping empty values.
func fields(w io.Writer, pairs ...string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", pairs[i], pairs[i+1])
		}
	}
	tw.Flush()
}

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
