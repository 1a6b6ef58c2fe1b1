package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/xitongsys/parquet-go-source/local"
	"github.com/xitongsys/parquet-go/common"
	"github.com/xitongsys/parquet-go/reader"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// parquetFile is a Parquet file as a reader from another library than
// the writer's (xitongsys/parquet-go) sees it: each leaf column's values
// by row, under its dotted path ("tags.list.element").
type parquetFile struct {
	rows, rowGroups int
	columns         map[string][][]any
}

func readParquet(t *testing.T, path string) parquetFile {
	t.Helper()
	fr, err := local.NewLocalFileReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	pr, err := reader.NewParquetColumnReader(fr, 1)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	defer pr.ReadStop()
	n := pr.GetNumRows()
	out := parquetFile{rows: int(n), rowGroups: len(pr.Footer.RowGroups), columns: map[string][][]any{}}
	for i, in := range pr.SchemaHandler.ValueColumns {
		ex := strings.Split(pr.SchemaHandler.InPathToExPath[in], common.PAR_GO_PATH_DELIMITER)
		name := strings.Join(ex[1:], ".")
		byRow := make([][]any, 0, n)
		if n > 0 {
			values, rls, _, err := pr.ReadColumnByIndex(int64(i), n)
			if err != nil {
				t.Fatalf("%s: column %s: %v", path, name, err)
			}
			for j, v := range values {
				if rls[j] == 0 {
					byRow = append(byRow, nil)
				}
				if v != nil {
					byRow[len(byRow)-1] = append(byRow[len(byRow)-1], v)
				}
			}
		}
		out.columns[name] = byRow
	}
	return out
}

// cell returns the one value of a scalar column in a row, nil for null.
func (p parquetFile) cell(t *testing.T, column string, row int) any {
	t.Helper()
	vals, ok := p.columns[column]
	if !ok {
		t.Fatalf("no column %s", column)
	}
	if len(vals[row]) == 0 {
		return nil
	}
	return vals[row][0]
}

// list returns a list column's strings in a row.
func (p parquetFile) list(t *testing.T, column string, row int) []string {
	t.Helper()
	var out []string
	for _, v := range p.columns[column+".list.element"][row] {
		out = append(out, v.(string))
	}
	return out
}

// readCSV reads a CSV export as maps from column to cell.
func readCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s is not CSV: %v", path, err)
	}
	var rows []map[string]string
	for _, r := range all[1:] {
		m := map[string]string{}
		for i, h := range all[0] {
			m[h] = r[i]
		}
		rows = append(rows, m)
	}
	return rows
}

// sameAsRow compares a Parquet row with the Go row it was written from,
// column by column.
func sameAsRow(t *testing.T, p parquetFile, i int, row any) {
	t.Helper()
	v := reflect.ValueOf(row)
	for _, c := range columnsOf(v.Type()) {
		f := v.Field(c.index)
		var want, got any
		switch {
		case f.Kind() == reflect.Slice:
			want, got = fmt.Sprint(f.Interface()), fmt.Sprint(p.list(t, c.name, i))
			if f.Len() == 0 {
				want = "[]"
			}
		case f.Kind() == reflect.Map:
			keys, vals := p.columns[c.name+".key_value.key"][i], p.columns[c.name+".key_value.value"][i]
			m := map[string]int32{}
			for j := range keys {
				m[keys[j].(string)] = vals[j].(int32)
			}
			want, got = fmt.Sprint(f.Interface()), fmt.Sprint(m)
			if f.Len() == 0 {
				want = "map[]"
			}
		case f.Kind() == reflect.Pointer && f.IsNil():
			want, got = nil, p.cell(t, c.name, i)
		case f.Kind() == reflect.Pointer:
			want, got = f.Elem().Interface(), p.cell(t, c.name, i)
		default:
			want, got = f.Interface(), p.cell(t, c.name, i)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("row %d column %s: wrote %#v, read %#v", i, c.name, want, got)
		}
	}
}

// sampleRecords are records of every kind with every field that can be
// set, set.
func sampleRecords(n int) []*preceptv1.ExportRecord {
	at := time.Date(2026, 11, 20, 10, 0, 0, 123456000, time.UTC)
	var recs []*preceptv1.ExportRecord
	for i := range n {
		dur, edit := int64(95+i), int32(12)
		recs = append(recs,
			&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Decision{Decision: &preceptv1.Feedback{
				Decision: &preceptv1.HITLDecision{DecisionId: fmt.Sprintf("d-%d", i), GateId: "HITL-2", EpicId: "E-1", TaskId: "T-9", Agent: "coder",
					Decision: preceptv1.Verdict_VERDICT_APPROVED_WITH_CHANGES, ReviewerId: "erin", Timestamp: timestamppb.New(at.Add(time.Duration(i) * time.Hour)),
					ReviewDurationSeconds: &dur, Rating: "negative", ErrorCategories: []string{"hallucination"}, Tags: []string{"reuse", "retry"},
					QualityScores: map[string]int32{"accuracy": 40, "style_match": 90}, ScopePath: "src/a.go", PromptVersion: "pv-1",
					AgentOutputSha: "aaa", ApprovedOutputSha: "bbb",
					ReviewerComment: "=HYPERLINK(\"http://x\") and, \"quoted\"\nsecond line", CorrectionDiffPath: "diffs/1.diff",
					CorrectionDiff: "-a\n+b\n", AgentOutput: "+1 out", ApprovedOutput: "@approved"},
				ReceivedAt: timestamppb.New(at), Source: "stream:1-0", Producer: "stream:s", EditDistancePercent: &edit, Commit: "c0ffee",
			}}},
			&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Evaluation{Evaluation: &preceptv1.Evaluation{
				DecisionId: fmt.Sprintf("d-%d", i), Classification: preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_LOW, Confidence: 0.75,
				Rationale: "two reviewers", SimilarFeedbackIds: []string{"d-0"}, ClusterId: "c-1", Evaluator: "deterministic",
				ProposedAction: &preceptv1.ProposedAction{Type: preceptv1.ActionType_ACTION_TYPE_CREATE_RULE, TargetAgent: "coder", Priority: "low"},
				Rubric: &preceptv1.RubricResult{Met: 2, Required: 2, Confidence: 0.8, Passed: true, Missing: []string{"location"},
					Attributes: []*preceptv1.RubricAttribute{{Name: "problem", Present: true, Evidence: "the loop"}}},
				ClusterStats: &preceptv1.ClusterStats{Size: 3, DistinctReviewers: 2, DistinctEpics: 1, DistinctProducers: 1},
				Lesson: &preceptv1.Lesson{Category: "reuse", Confidence: 0.9, Said: "the loop", Asked: "use the helper", Taxonomy: "v1", By: "deterministic",
					Evidence: []*preceptv1.LessonEvidence{{Kind: "cue", Text: "helper"}}},
				EvaluatedAt: timestamppb.New(at), Revision: 1,
			}}},
		)
	}
	recs = append(recs,
		&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_RuleEffect{RuleEffect: &preceptv1.RuleEffect{
			RuleId: "R-1", Agents: []string{"coder"}, Status: preceptv1.RuleStatus_RULE_STATUS_ACTIVE, Confidence: 0.7, Category: "reuse",
			Attribution: preceptv1.Attribution_ATTRIBUTION_MIXED, Exposures: 40, Recurrences: 4, RateAfter: 0.1,
			RateAfterInterval: &preceptv1.Interval{Low: 0.04, High: 0.23}, Change: -0.15, ChangeInterval: &preceptv1.Interval{Low: -0.3, High: 0.01},
			Method: "wilson 95%; newcombe", Verdict: "improving", Summary: "recurs less", ActivatedAt: timestamppb.New(at),
			Shadow: &preceptv1.ShadowComparison{ShadowDecisions: 5, MainDecisions: 6, Change: -0.2, ChangeInterval: &preceptv1.Interval{Low: -0.5, High: 0.1}},
		}}},
		&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_RuleEffect{RuleEffect: &preceptv1.RuleEffect{RuleId: "R-2"}}},
		&preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Summary{Summary: &preceptv1.ExportSummary{Decisions: int64(n)}}},
	)
	return recs
}

// writeExport writes records through the sink a format uses.
func writeExport(t *testing.T, dir, format string, recs []*preceptv1.ExportRecord) {
	t.Helper()
	sink, err := openFileSink(dir, format)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := sink.write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.commit(); err != nil {
		t.Fatal(err)
	}
}

func TestParquetExportReadsBackThroughAnotherLibraryRowGroupByRowGroup(t *testing.T) {
	dir := t.TempDir()
	n := parquetRowGroupRows + 10
	recs := sampleRecords(n)
	writeExport(t, dir, "parquet", recs)

	decisions := readParquet(t, filepath.Join(dir, "decisions.parquet"))
	if decisions.rows != n || decisions.rowGroups != 2 {
		t.Fatalf("%d rows in %d row groups, want %d in 2", decisions.rows, decisions.rowGroups, n)
	}
	evaluations := readParquet(t, filepath.Join(dir, "evaluations.parquet"))
	effects := readParquet(t, filepath.Join(dir, "rule_effects.parquet"))
	for i := range n {
		if i != 0 && i != n-1 {
			continue
		}
		sameAsRow(t, decisions, i, decisionRowOf(recs[2*i].GetDecision()))
		row, err := evaluationRowOf(recs[2*i+1].GetEvaluation())
		if err != nil {
			t.Fatal(err)
		}
		sameAsRow(t, evaluations, i, row)
	}
	if effects.rows != 2 {
		t.Fatalf("%d rule effects", effects.rows)
	}
	sameAsRow(t, effects, 0, ruleEffectRowOf(recs[2*n].GetRuleEffect()))
	sameAsRow(t, effects, 1, ruleEffectRowOf(recs[2*n+1].GetRuleEffect()))
	// The values as the decision said them, not just as the row held them.
	if got := decisions.cell(t, "timestamp", 1); got != time.Date(2026, 11, 20, 11, 0, 0, 123456000, time.UTC).UnixMicro() {
		t.Errorf("timestamp %v", got)
	}
	if got := decisions.cell(t, "decision", 0); got != "APPROVED_WITH_CHANGES" {
		t.Errorf("decision %v", got)
	}
	if got := effects.cell(t, "shadow_change_low", 0); got != -0.5 {
		t.Errorf("shadow_change_low %v", got)
	}
}

// rowGroupRows lists the rows of each row group of a Parquet file, as its
// footer says.
func rowGroupRows(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var rows []int64
	for _, rg := range pf.RowGroups() {
		rows = append(rows, rg.NumRows())
	}
	return rows
}

// TestParquetRowGroupsEndAtTheTextBudget writes decisions whose texts
// are large: a row group must end once its rows hold
// parquetRowGroupBytes of text, long before parquetRowGroupRows rows.
func TestParquetRowGroupsEndAtTheTextBudget(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	perRow := textBytes(reflect.ValueOf(decisionRowOf(bigDecision(0, big).GetDecision())))
	if perRow < len(big) {
		t.Fatalf("a row with %d bytes of output counts %d bytes of text", len(big), perRow)
	}
	var recs []*preceptv1.ExportRecord
	for i := range 9 {
		recs = append(recs, bigDecision(i, big))
	}
	dir := t.TempDir()
	writeExport(t, dir, "parquet", recs)
	// 8 rows of 8 MiB and a little reach 64 MiB: a row group of 8, then 1.
	first := (parquetRowGroupBytes + perRow - 1) / perRow
	want := []int64{int64(first), int64(9 - first)}
	if got := rowGroupRows(t, filepath.Join(dir, "decisions.parquet")); !slices.Equal(got, want) {
		t.Fatalf("row groups of %v rows, want %v (%d bytes of text a row, budget %d)", got, want, perRow, parquetRowGroupBytes)
	}
}

// bigDecision is a decision record whose agent output is out.
func bigDecision(i int, out string) *preceptv1.ExportRecord {
	return &preceptv1.ExportRecord{Record: &preceptv1.ExportRecord_Decision{Decision: &preceptv1.Feedback{
		Decision: &preceptv1.HITLDecision{DecisionId: fmt.Sprintf("big-%d", i), Agent: "coder", ReviewerId: "erin", AgentOutput: out}}}}
}

func TestRowTextCountsStringsListsAndMapKeys(t *testing.T) {
	row := decisionRow{DecisionID: "d-1", Tags: []string{"ab", "cde"}, QualityScores: map[string]int32{"accuracy": 40}, AgentOutput: "12345"}
	if got, want := textBytes(reflect.ValueOf(row)), len("d-1")+len("abcde")+len("accuracy")+len("12345"); got != want {
		t.Fatalf("textBytes = %d, want %d", got, want)
	}
}

// TestARenameFailingPartWaySaysWhichFilesAreNew makes the second of the
// three renames fail (rule_effects.csv is a directory): the error must
// say that evaluations.csv is new and the other two are not, and the
// abort that follows must leave decisions.csv as it was and no
// temporary file.
func TestARenameFailingPartWaySaysWhichFilesAreNew(t *testing.T) {
	dir := t.TempDir()
	writeExport(t, dir, "csv", sampleRecords(1))
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	decisions, evaluations := read("decisions.csv"), read("evaluations.csv")
	effects := filepath.Join(dir, "rule_effects.csv")
	if err := os.Remove(effects); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(effects, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}

	sink, err := openFileSink(dir, "csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sampleRecords(3) {
		if err := sink.write(r); err != nil {
			t.Fatal(err)
		}
	}
	err = sink.commit()
	sink.abort()
	want := "now mixes two exports: evaluations.csv new, rule_effects.csv and decisions.csv as before (or absent); export again"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("commit: %v; want %q", err, want)
	}
	if read("decisions.csv") != decisions || read("evaluations.csv") == evaluations {
		t.Fatal("decisions.csv replaced, or evaluations.csv not")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %q", left)
	}
}

func TestCSVExportQuotesAndDefusesFormulas(t *testing.T) {
	dir := t.TempDir()
	writeExport(t, dir, "csv", sampleRecords(2))
	raw, err := os.ReadFile(filepath.Join(dir, "decisions.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), "decision_id,timestamp,gate_id,") || !strings.Contains(string(raw), "\r\n") {
		t.Fatalf("header or line ends: %q", raw[:80])
	}
	rows := readCSV(t, filepath.Join(dir, "decisions.csv"))
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	for col, want := range map[string]string{
		"decision_id":             "d-0",
		"timestamp":               "2026-11-20T10:00:00.123456Z",
		"decision":                "APPROVED_WITH_CHANGES",
		"review_duration_seconds": "95",
		"reviewer_comment":        "'=HYPERLINK(\"http://x\") and, \"quoted\"\nsecond line",
		"correction_diff":         "'-a\n+b\n",
		"agent_output":            "'+1 out",
		"approved_output":         "'@approved",
		"tags":                    `["reuse","retry"]`,
		"quality_scores":          `{"accuracy":40,"style_match":90}`,
		"edit_distance_percent":   "12",
		"task_id":                 "T-9",
	} {
		if r[col] != want {
			t.Errorf("%s: %q, want %q", col, r[col], want)
		}
	}
	effects := readCSV(t, filepath.Join(dir, "rule_effects.csv"))
	if effects[0]["change"] != "-0.15" || effects[0]["change_low"] != "-0.3" || effects[1]["change_low"] != "" || effects[0]["status"] != "ACTIVE" {
		t.Errorf("rule effects: numbers must stay numbers, absent intervals empty: %v", effects)
	}
	evaluations := readCSV(t, filepath.Join(dir, "evaluations.csv"))
	if evaluations[0]["lesson_evidence"] != `[{"kind":"cue","text":"helper"}]` || evaluations[0]["rubric_passed"] != "true" {
		t.Errorf("evaluations: %v", evaluations[0])
	}
}
