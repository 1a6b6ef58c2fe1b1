package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"github.com/precept-dev/precept/lib/durable"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/parquet-go/parquet-go"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// Export kinds: the "kind" of a JSON line, and the file each kind goes to
// under --out (docs/formats.md, "Exports").
const (
	kindDecision   = "decision"
	kindEvaluation = "evaluation"
	kindRuleEffect = "rule_effect"
	kindSummary    = "summary"
)

var exportFiles = map[string]string{
	kindDecision:   "decisions",
	kindEvaluation: "evaluations",
	kindRuleEffect: "rule_effects",
}

// Rows are written to Parquet a row group at a time as records arrive:
// a row group ends at parquetRowGroupRows rows or once its rows hold
// parquetRowGroupBytes of text, whichever comes first. The byte budget
// bounds what the CLI holds per kind: a full decision row may carry four
// texts of up to 256 KiB, so 4,096 of them could be 4 GiB
// (docs/thresholds.md, "Exports").
const (
	parquetRowGroupRows  = 4096
	parquetRowGroupBytes = 64 << 20
)

// exportFlags are the export command's flags, checked.
type exportFlags struct {
	format    string
	from, to  string
	out       string
	anonymize bool
}

// parseExportBound reads --from or --to: a date (a whole day, UTC) or an
// RFC 3339 time. A date given as --to includes that day.
func parseExportBound(flag, s string, end bool) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		if end {
			t = t.AddDate(0, 0, 1)
		}
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, usagef("--%s %q is not a date (2026-11-20) or an RFC 3339 time (2026-11-20T10:00:00Z)", flag, s)
}

// request checks the flags and builds the request; it touches nothing.
func (f exportFlags) request() (*preceptv1.ExportRequest, error) {
	switch f.format {
	case "jsonl":
	case "csv", "parquet":
		if f.out == "" {
			return nil, usagef("--format %s writes one file per kind: give --out DIR", f.format)
		}
	default:
		return nil, usagef("--format must be jsonl, csv or parquet, got %q", f.format)
	}
	from, err := parseExportBound("from", f.from, false)
	if err != nil {
		return nil, err
	}
	to, err := parseExportBound("to", f.to, true)
	if err != nil {
		return nil, err
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return nil, usagef("--from %s is not before --to %s", f.from, f.to)
	}
	if f.out != "" {
		if st, err := os.Stat(f.out); err == nil && !st.IsDir() {
			return nil, usagef("--out %s is not a directory", f.out)
		}
	}
	req := &preceptv1.ExportRequest{Anonymize: f.anonymize}
	if !from.IsZero() {
		req.From = timestamppb.New(from)
	}
	if !to.IsZero() {
		req.To = timestamppb.New(to)
	}
	return req, nil
}

// exportCmd is the export command. A function, not a method: cli has as
// many methods as a type may (architecture_test.go).
func exportCmd(c *cli) *cobra.Command {
	f := exportFlags{}
	cmd := &cobra.Command{
		Use:   "export [--format jsonl|csv|parquet] [--from DATE] [--to DATE] [--anonymize] [--out DIR]",
		Short: "Export decisions, evaluations and rule effects as JSON lines, CSV or Parquet",
		Long: "Export streams the decisions made between --from and --to with their evaluations, and every rule's effect.\n" +
			"A date means a whole UTC day, both ends included: --from 2026-11-01 --to 2026-11-30 is all of November;\n" +
			"an RFC 3339 time is exact, --from included and --to not.\n" +
			"JSON lines go to stdout, one record a line with a \"kind\", ending with the summary; with --out DIR (required\n" +
			"for csv and parquet) each kind goes to DIR/decisions.EXT, DIR/evaluations.EXT and DIR/rule_effects.EXT, written\n" +
			"under temporary names and renamed only once the export is complete.\n" +
			"--anonymize (reader role; without it the export needs approver) hashes with the server's secret salt\n" +
			"reviewer ids, API token and curator names, and the decision, epic and task ids (a decision's hashed id still\n" +
			"joins its evaluation); it drops all free text (comments, outputs, diffs, tags, rationales, lesson texts, rule\n" +
			"effect summaries), scope_path, and a prompt_version not of precept's form (v1: and 16 hex digits); it keeps gate,\n" +
			"cluster, proposal and rule ids, agents, commits, labels, numbers and times. Anyone with reader access to the\n" +
			"server can still match rows to stored decisions by agent and time.\n" +
			"Columns: docs/formats.md, \"Exports\".",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("export takes flags only, got %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// An export takes as long as it takes, unless --timeout is given.
			if cmd.Flag("timeout").Changed {
				var cancel context.CancelFunc
				ctx, cancel = c.ctx(cmd)
				defer cancel()
			}
			return runExport(ctx, c, f, req)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "jsonl", "jsonl, csv or parquet")
	fl.StringVar(&f.from, "from", "", "first day (2026-11-01) or time (RFC 3339) of the decisions exported")
	fl.StringVar(&f.to, "to", "", "last day exported, or the time before which decisions are exported")
	fl.StringVar(&f.out, "out", "", "directory for decisions.EXT, evaluations.EXT and rule_effects.EXT")
	fl.BoolVar(&f.anonymize, "anonymize", false, "hash people's and producers' ids, leave out all free text")
	return cmd
}

// runExport runs the export into its sink. Nothing is created before the
// server has accepted the request, and files are renamed into place only
// once its summary has arrived.
func runExport(ctx context.Context, c *cli, f exportFlags, req *preceptv1.ExportRequest) (err error) {
	client := preceptv1connect.NewExportServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
	stream, err := client.Export(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer stream.Close()
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return err
		}
		return errors.New("the server ended the export without a record")
	}
	var sink exportSink
	if f.out == "" {
		sink = &jsonlSink{w: bufio.NewWriter(c.stdout)}
	} else if sink, err = openFileSink(f.out, f.format); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			sink.abort()
		}
	}()
	var sum *preceptv1.ExportSummary
	for {
		rec := stream.Msg()
		if sum != nil {
			return errors.New("the server sent records after the summary")
		}
		if s := rec.GetSummary(); s != nil {
			sum = s
		}
		if err := sink.write(rec); err != nil {
			return err
		}
		if !stream.Receive() {
			break
		}
	}
	cut := "export cut short, nothing written: "
	if f.out == "" {
		cut = "export cut short, the lines printed lack the summary: "
	}
	if err := stream.Err(); err != nil {
		// Not wrapped: the CLI prints a Connect error as its code and
		// message alone, and this one must say what became of the output.
		return errors.New(cut + oneLine(err))
	}
	if sum == nil {
		return errors.New(cut + "the server ended it without its summary")
	}
	if err := sink.commit(); err != nil {
		return err
	}
	if f.out != "" {
		_, err = fmt.Fprintln(c.stdout, exportReport(sum, f.out))
	}
	return err
}

// exportReport says what an export to a directory wrote.
func exportReport(sum *preceptv1.ExportSummary, dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exported %d decisions, %d evaluations and %d rule effects to %s", sum.GetDecisions(), sum.GetEvaluations(), sum.GetRuleEffects(), dir)
	if sum.GetAnonymized() {
		b.WriteString(" (anonymized)")
	}
	if n := sum.GetPendingEvaluations(); n > 0 {
		fmt.Fprintf(&b, "\n%d decisions are not evaluated yet", n)
	}
	for _, n := range sum.GetNotes() {
		b.WriteString("\nnote: " + n)
	}
	return b.String()
}

// exportSink receives an export's records in order, the summary last.
type exportSink interface {
	write(rec *preceptv1.ExportRecord) error
	// commit makes a complete export visible.
	commit() error
	// abort removes whatever an incomplete export wrote.
	abort()
}

// recordKind returns a record's kind and message.
func recordKind(rec *preceptv1.ExportRecord) (string, proto.Message) {
	switch r := rec.Record.(type) {
	case *preceptv1.ExportRecord_Decision:
		return kindDecision, r.Decision
	case *preceptv1.ExportRecord_Evaluation:
		return kindEvaluation, r.Evaluation
	case *preceptv1.ExportRecord_RuleEffect:
		return kindRuleEffect, r.RuleEffect
	case *preceptv1.ExportRecord_Summary:
		return kindSummary, r.Summary
	}
	return "", nil
}

// jsonLine renders a record as one JSON line: its message as -o json
// prints it, with "kind" first.
func jsonLine(rec *preceptv1.ExportRecord) ([]byte, error) {
	kind, msg := recordKind(rec)
	if msg == nil {
		return nil, errors.New("the server sent a record of a kind this precept does not know: upgrade it")
	}
	b, err := marshalJSON(msg, false)
	if err != nil {
		return nil, err
	}
	line := []byte(`{"kind":"` + kind + `"`)
	if len(b) > 2 {
		line = append(line, ',')
	}
	line = append(line, b[1:]...)
	return append(line, '\n'), nil
}

// jsonlSink writes every record, summary included, to one stream.
type jsonlSink struct{ w *bufio.Writer }

func (s *jsonlSink) write(rec *preceptv1.ExportRecord) error {
	line, err := jsonLine(rec)
	if err != nil {
		return err
	}
	_, err = s.w.Write(line)
	return err
}

func (s *jsonlSink) commit() error { return s.w.Flush() }

// abort flushes what was written: on a stream it cannot be taken back,
// and a reader tells an incomplete one by its missing summary.
func (s *jsonlSink) abort() { s.w.Flush() }

// tempFile is a file written under a temporary name in its directory and
// renamed to its name once complete.
type tempFile struct {
	*os.File
	path string
}

func createTemp(dir, name string) (*tempFile, error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return nil, err
	}
	return &tempFile{File: f, path: filepath.Join(dir, name)}, nil
}

// finish makes the content durable; the file is then ready to rename.
func (f *tempFile) finish() error {
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func (f *tempFile) abort() {
	f.Close()
	os.Remove(f.Name())
}

// kindWriter writes one kind's records into its file.
type kindWriter interface {
	write(rec *preceptv1.ExportRecord) error
	// close finishes the file's content (a CSV's last buffer, a Parquet
	// footer).
	close() error
}

// fileSink writes each kind to its own file in a directory.
type fileSink struct {
	dir     string
	files   []*tempFile // in renameOrder
	writers map[string]kindWriter
}

// renameOrder is the order in which a complete export's files replace
// the earlier ones: decisions last, so a decisions file from this export
// means the other two are from it too (docs/formats.md, "Exports").
var renameOrder = []string{kindEvaluation, kindRuleEffect, kindDecision}

func openFileSink(dir, format string) (_ *fileSink, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &fileSink{dir: dir, writers: map[string]kindWriter{}}
	defer func() {
		if err != nil {
			s.abort()
		}
	}()
	for _, kind := range renameOrder {
		f, err := createTemp(dir, exportFiles[kind]+"."+format)
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, f)
		w, err := newKindWriter(kind, format, f)
		if err != nil {
			return nil, err
		}
		s.writers[kind] = w
	}
	return s, nil
}

func (s *fileSink) write(rec *preceptv1.ExportRecord) error {
	kind, _ := recordKind(rec)
	if kind == kindSummary {
		return nil
	}
	w, ok := s.writers[kind]
	if !ok {
		return errors.New("the server sent a record of a kind this precept does not know: upgrade it")
	}
	return w.write(rec)
}

func (s *fileSink) commit() error {
	for _, kind := range []string{kindDecision, kindEvaluation, kindRuleEffect} {
		if err := s.writers[kind].close(); err != nil {
			return fmt.Errorf("write %s: %w", exportFiles[kind], err)
		}
	}
	for _, f := range s.files {
		if err := f.finish(); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Base(f.path), err)
		}
	}
	for i, f := range s.files {
		if err := os.Rename(f.Name(), f.path); err != nil {
			return s.renameError(i, err)
		}
	}
	// The renames are durable only once the directory is.
	if err := durable.SyncDir(s.dir); err != nil {
		return fmt.Errorf("the export is in %s, but syncing the directory failed, so a crash could undo it: %w", s.dir, err)
	}
	return nil
}

// renameError says what a rename that failed, after done files were
// renamed, left in the directory: which files are new and which are as
// before (or absent). The new files not renamed are removed with the
// other temporary files.
func (s *fileSink) renameError(done int, err error) error {
	if done == 0 {
		return fmt.Errorf("export not written, %s as it was: %w", s.dir, err)
	}
	names := func(fs []*tempFile) string {
		var out []string
		for _, f := range fs {
			out = append(out, filepath.Base(f.path))
		}
		return strings.Join(out, " and ")
	}
	return fmt.Errorf("export half written: %s now mixes two exports: %s new, %s as before (or absent); export again: %w",
		s.dir, names(s.files[:done]), names(s.files[done:]), err)
}

func (s *fileSink) abort() {
	for _, f := range s.files {
		f.abort()
	}
}

func newKindWriter(kind, format string, f *tempFile) (kindWriter, error) {
	switch kind {
	case kindDecision:
		return newTableWriter(format, f, func(r *preceptv1.ExportRecord) (decisionRow, error) {
			return decisionRowOf(r.GetDecision()), nil
		})
	case kindEvaluation:
		return newTableWriter(format, f, func(r *preceptv1.ExportRecord) (evaluationRow, error) {
			return evaluationRowOf(r.GetEvaluation())
		})
	default:
		return newTableWriter(format, f, func(r *preceptv1.ExportRecord) (ruleEffectRow, error) {
			return ruleEffectRowOf(r.GetRuleEffect()), nil
		})
	}
}

// newTableWriter writes one kind in a format: JSON lines, or rows of T
// as CSV or Parquet.
func newTableWriter[T any](format string, w io.Writer, row func(*preceptv1.ExportRecord) (T, error)) (kindWriter, error) {
	switch format {
	case "jsonl":
		return &jsonlFile{w: bufio.NewWriter(w)}, nil
	case "csv":
		t := &csvTable[T]{w: csv.NewWriter(w), row: row, cols: columnsOf(reflect.TypeFor[T]())}
		t.w.UseCRLF = true
		header := make([]string, len(t.cols))
		for i, c := range t.cols {
			header[i] = c.name
		}
		return t, t.w.Write(header)
	default:
		pw := parquet.NewGenericWriter[T](w, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(parquetRowGroupRows),
			parquet.CreatedBy("precept", "export", ""))
		return &parquetTable[T]{w: pw, row: row}, nil
	}
}

// jsonlFile writes one kind's records as JSON lines.
type jsonlFile struct{ w *bufio.Writer }

func (j *jsonlFile) write(rec *preceptv1.ExportRecord) error {
	line, err := jsonLine(rec)
	if err != nil {
		return err
	}
	_, err = j.w.Write(line)
	return err
}

func (j *jsonlFile) close() error { return j.w.Flush() }

// csvTable writes rows of T as RFC 4180 CSV with a header.
type csvTable[T any] struct {
	w    *csv.Writer
	row  func(*preceptv1.ExportRecord) (T, error)
	cols []column
}

func (t *csvTable[T]) write(rec *preceptv1.ExportRecord) error {
	r, err := t.row(rec)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(r)
	cells := make([]string, len(t.cols))
	for i, c := range t.cols {
		if cells[i], err = csvCell(v.Field(c.index), c); err != nil {
			return err
		}
	}
	return t.w.Write(cells)
}

func (t *csvTable[T]) close() error {
	t.w.Flush()
	return t.w.Error()
}

// parquetTable writes rows of T to Parquet, a row group at a time.
type parquetTable[T any] struct {
	w    *parquet.GenericWriter[T]
	row  func(*preceptv1.ExportRecord) (T, error)
	rows []T
	// text is how many bytes of text the buffered rows hold.
	text int
}

func (t *parquetTable[T]) write(rec *preceptv1.ExportRecord) error {
	r, err := t.row(rec)
	if err != nil {
		return err
	}
	t.rows = append(t.rows, r)
	t.text += textBytes(reflect.ValueOf(r))
	if len(t.rows) >= parquetRowGroupRows || t.text >= parquetRowGroupBytes {
		return t.flush()
	}
	return nil
}

// flush writes the buffered rows out as a row group.
func (t *parquetTable[T]) flush() error {
	if len(t.rows) == 0 {
		return nil
	}
	if _, err := t.w.Write(t.rows); err != nil {
		return err
	}
	// Cleared, not just cut: the texts are not kept alive until
	// overwritten.
	clear(t.rows)
	t.rows, t.text = t.rows[:0], 0
	return t.w.Flush()
}

// textBytes is how many bytes of text a row holds, in its strings, lists
// of strings and map keys: what makes rows large.
func textBytes(row reflect.Value) int {
	n := 0
	for i := range row.NumField() {
		f := row.Field(i)
		switch {
		case f.Kind() == reflect.String:
			n += f.Len()
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			for j := range f.Len() {
				n += f.Index(j).Len()
			}
		case f.Kind() == reflect.Map && f.Type().Key().Kind() == reflect.String:
			for _, k := range f.MapKeys() {
				n += k.Len()
			}
		}
	}
	return n
}

func (t *parquetTable[T]) close() error {
	if err := t.flush(); err != nil {
		return err
	}
	return t.w.Close()
}
