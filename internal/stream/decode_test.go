package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/testenv"
)

// badEntry is an entry the consumer must dead-letter, with a distinctive
// part of the reason it must give (starting with the field at fault).
type badEntry struct {
	name   string
	fields []any
	want   string
	// deleted entries are delivered, then removed from the stream: they
	// come back from the pending list with no fields.
	deleted bool
}

// testLimits are the limits the dead-letter tests run under, small enough
// to exceed cheaply.
var testLimits = precept.Limits{MaxCommentBytes: 1024, MaxEventBytes: 16 << 10}

func badEntries() []badEntry {
	ev := flatEvent("bad")
	return []badEntry{
		{name: "missing decision_id", fields: without(ev, "decision_id"), want: "decision_id: required"},
		{name: "empty gate_id", fields: with(ev, "gate_id", ""), want: "gate_id: required"},
		{name: "missing epic_id", fields: without(ev, "epic_id"), want: "epic_id: required"},
		{name: "missing agent", fields: without(ev, "agent"), want: "agent: required"},
		{name: "missing decision", fields: without(ev, "decision"), want: "decision: required"},
		{name: "missing reviewer_id", fields: without(ev, "reviewer_id"), want: "reviewer_id: required"},
		{name: "missing timestamp", fields: without(ev, "timestamp"), want: "timestamp: required"},
		{name: "empty timestamp in data", fields: []any{"data", jsonData("bad", map[string]any{"timestamp": ""})}, want: "timestamp: required"},
		{name: "bad decision enum", fields: with(ev, "decision", "MAYBE"), want: "decision: must be APPROVED"},
		{name: "bad decision_id characters", fields: with(ev, "decision_id", "has space"), want: "decision_id: must start"},
		{name: "bad timestamp", fields: with(ev, "timestamp", "yesterday"), want: "timestamp: not an RFC 3339"},
		{name: "future timestamp", fields: with(ev, "timestamp", "2026-05-03T12:00:00Z"), want: "timestamp: more than 24h0m0s in the future"},
		{name: "negative duration", fields: with(ev, "review_duration_seconds", "-5"), want: "review_duration_seconds: must not be negative"},
		{name: "duration not an integer", fields: with(ev, "review_duration_seconds", "12.5"), want: "review_duration_seconds: must be a decimal integer"},
		{name: "duration of the wrong JSON type", fields: []any{"data", jsonData("bad", map[string]any{"review_duration_seconds": "12"})}, want: "review_duration_seconds: wrong type"},
		{name: "oversized comment", fields: with(ev, "reviewer_comment", strings.Repeat("c", 1025)), want: "reviewer_comment: 1025 bytes, more than the limit of 1024"},
		{name: "oversized event", fields: with(ev, "agent_output", strings.Repeat("o", 16<<10)), want: "event: "},
		{name: "invalid JSON in data", fields: []any{"data", `{"decision_id": "x",`}, want: "data: invalid JSON"},
		{name: "trailing data after the JSON object", fields: []any{"data", jsonData("bad", nil) + ` {}`}, want: "data: trailing data"},
		{name: "data not an object", fields: []any{"data", `["decision_id"]`}, want: "data: must be a JSON object"},
		{name: "data not valid UTF-8", fields: []any{"data", `{"decision_id": "` + "\xc3\x28" + `"}`}, want: "data: not valid UTF-8"},
		{name: "unknown flat field", fields: with(ev, "colour", "blue"), want: "colour: unknown field"},
		{name: "unknown field in data", fields: []any{"data", jsonData("bad", map[string]any{"colour": "blue"})}, want: "colour: unknown field"},
		{name: "data mixed with flat fields", fields: []any{"data", jsonData("bad", nil), "agent", "coder"}, want: "agent: flat event field mixed with data"},
		{name: "tags not a JSON array", fields: with(ev, "tags", "security"), want: "tags: must be a JSON array of strings"},
		{name: "tags holding a number", fields: with(ev, "tags", `["ok", 7]`), want: "tags: must be a JSON array of strings"},
		{name: "bad tag", fields: with(ev, "tags", `["has space"]`), want: "tags: entry"},
		{name: "error_categories not a JSON array", fields: with(ev, "error_categories", `{"a":1}`), want: "error_categories: must be a JSON array"},
		{name: "non-UTF-8 value", fields: with(ev, "reviewer_comment", "caf\xe9 \xff\xfe"), want: "reviewer_comment: not valid UTF-8"},
		{name: "non-UTF-8 field name", fields: with(ev, "na\xffme", "x"), want: `"na\xffme": field name is not valid UTF-8`},
		{name: "bad rating", fields: with(ev, "rating", "great"), want: "rating: must be positive, negative or skipped"},
		{name: "quality score out of range", fields: with(ev, "quality_scores", `{"clarity":101}`), want: "quality_scores: clarity is 101, want 0-100"},
		{name: "quality_scores not an object", fields: with(ev, "quality_scores", `[60]`), want: "quality_scores: must be a JSON object"},
		{name: "scope_path with ..", fields: with(ev, "scope_path", "services/../../etc/passwd"), want: "scope_path: must not contain .."},
		{name: "absolute correction_diff_path", fields: with(ev, "correction_diff_path", "/etc/passwd"), want: "correction_diff_path: must be relative"},
		{name: "bad schema_version", fields: with(ev, "schema_version", "2"), want: `schema_version: must be "1", got "2"`},
		{name: "bad schema_version inside data", fields: []any{"data", jsonData("bad", map[string]any{"schema_version": "2"})}, want: `schema_version: must be "1"`},
		{name: "entry with no fields", deleted: true, want: "entry: has no fields"},
	}
}

func TestDecodeEntryReadsBothEncodingsAlike(t *testing.T) {
	flat, err := DecodeEntry(valuesMap(flatEvent("d-1")))
	if err != nil {
		t.Fatalf("flat: %v", err)
	}
	data, err := DecodeEntry(valuesMap(jsonEvent("d-1")))
	if err != nil {
		t.Fatalf("data: %v", err)
	}
	if !reflect.DeepEqual(flat, data) {
		t.Errorf("encodings disagree:\nflat %+v\ndata %+v", flat, data)
	}
	duration := int64(42)
	want := precept.Decision{
		DecisionID: "d-1", GateID: "HITL-2", EpicID: "EPIC-7", TaskID: "T-1", Agent: "coder",
		Decision: precept.Rejected, ReviewerID: "alice",
		Timestamp:             time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC),
		ReviewDurationSeconds: &duration,
		ReviewerComment:       "Use the shared HTTP client instead of http.DefaultClient.",
		Tags:                  []string{"style", "HTTP"},
		ScopePath:             "services/api/client.go",
		Rating:                "negative",
		ErrorCategories:       []string{"design"},
		QualityScores:         map[string]int32{"clarity": 60},
		PromptVersion:         "pv-1",
	}
	if !reflect.DeepEqual(flat, want) {
		t.Errorf("flat = %+v\nwant %+v", flat, want)
	}
}

func TestDecodeEntryIgnoresEnvelopeFields(t *testing.T) {
	envelope := []any{"event_type", "hitl.decision", "producer", "hitl-ui", "traceparent", "00-abc-def-01", "schema_version", "1"}
	inData := jsonData("d-1", map[string]any{"schema_version": "1", "event_type": "hitl.decision"})
	tests := []struct {
		name   string
		fields []any
	}{
		{"flat with envelope", append(flatEvent("d-1"), envelope...)},
		{"data with envelope beside it", append(jsonEvent("d-1"), envelope...)},
		{"data with envelope inside", []any{"data", inData}},
	}
	want, err := DecodeEntry(valuesMap(flatEvent("d-1")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeEntry(valuesMap(tt.fields))
			if err != nil {
				t.Fatalf("DecodeEntry: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDecodeEntryTreatsEmptyOptionalFlatFieldsAsAbsent(t *testing.T) {
	ev := flatEvent("d-1")
	for _, f := range []string{"tags", "error_categories", "quality_scores", "review_duration_seconds"} {
		ev = with(ev, f, "")
	}
	d, err := DecodeEntry(valuesMap(ev))
	if err != nil {
		t.Fatalf("DecodeEntry: %v", err)
	}
	if d.Tags != nil || d.ErrorCategories != nil || d.QualityScores != nil || d.ReviewDurationSeconds != nil {
		t.Errorf("empty optional fields decoded as %+v", d)
	}
}

func TestDecodeEntryAcceptsByteValues(t *testing.T) {
	m := valuesMap(flatEvent("d-1"))
	for k, v := range m {
		m[k] = []byte(v.(string))
	}
	if _, err := DecodeEntry(m); err != nil {
		t.Fatalf("DecodeEntry with []byte values: %v", err)
	}
}

func TestDecodeEntryRefusesNonStringValues(t *testing.T) {
	_, err := DecodeEntry(valuesMap(with(flatEvent("d-1"), "agent", 7)))
	if err == nil || !strings.Contains(err.Error(), "agent: value is not a string") {
		t.Fatalf("err = %v, want agent: value is not a string", err)
	}
}

// TestRejectsBadEntriesNamingTheField runs the dead-letter table through
// decoding and validation without Redis.
func TestRejectsBadEntriesNamingTheField(t *testing.T) {
	for _, tt := range badEntries() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := validate(valuesMap(tt.fields), testLimits, testNow)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("reason %q does not contain %q", err.Error(), tt.want)
			}
			var v *precept.ValidationError
			if !errors.As(err, &v) {
				t.Errorf("error %T is not a *precept.ValidationError", err)
			}
			if precept.ErrorCode(err) != precept.Invalid {
				t.Errorf("code = %s, want invalid", precept.ErrorCode(err))
			}
		})
	}
}

// TestDataJSONIsDecodedStrictly runs the table every JSON path shares
// (testdata/strict-decoding.json) through the data field, with and
// without an envelope field inside the object: removing the envelope must
// not hide a duplicate or a case variant.
func TestDataJSONIsDecodedStrictly(t *testing.T) {
	for _, c := range testenv.DecodingCases(t) {
		for _, envelope := range []bool{false, true} {
			data := string(c.Event)
			name := c.Name
			if envelope {
				data = strings.TrimSuffix(data, "}") + `,"producer":"hitl-ui"}`
				name += " with an envelope field"
			}
			t.Run(name, func(t *testing.T) {
				_, err := validate(map[string]any{"data": data}, testLimits, testNow)
				switch {
				case c.Error == "" && err != nil:
					t.Fatalf("%s: %v", data, err)
				case c.Error != "" && err == nil:
					t.Fatalf("%s accepted, want %q", data, c.Error)
				case c.Error != "" && !strings.Contains(err.Error(), c.Error):
					t.Fatalf("%s: error %q does not say %q", data, err, c.Error)
				}
			})
		}
	}
}

// TestManyBadFieldsGiveABoundedReason: an entry with thousands of unknown
// fields is refused with a reason (stored in the dead letter and logged)
// that names a few of them and counts the rest.
func TestManyBadFieldsGiveABoundedReason(t *testing.T) {
	flat := valuesMap(flatEvent("d-1"))
	obj := map[string]any{}
	for i := range 10000 {
		name := fmt.Sprintf("unknown_field_%05d", i)
		flat[name] = "x"
		obj[name] = "x"
	}
	data, _ := json.Marshal(obj)
	for name, values := range map[string]map[string]any{"flat": flat, "data": {"data": string(data)}} {
		t.Run(name, func(t *testing.T) {
			_, err := validate(values, precept.Limits{MaxEventBytes: 1 << 20}, testNow)
			if err == nil {
				t.Fatal("accepted")
			}
			for what, s := range map[string]string{"reason": err.Error(), "log reason": logReason(err)} {
				if len(s) > 2048 {
					t.Errorf("%s is %d bytes: %.200s…", what, len(s), s)
				}
				if !strings.Contains(s, "unknown_field_00000") {
					t.Errorf("%s does not name the first unknown field: %.200s", what, s)
				}
			}
			if more := fmt.Sprintf("%d more", 10000-precept.MaxProblems); !strings.Contains(err.Error(), more) {
				t.Errorf("reason does not count the fields it leaves out: %.300s", err)
			}
		})
	}
}

func TestLogReasonNamesFieldsWithoutValues(t *testing.T) {
	secret := "s3cr3t-value"
	_, err := validate(valuesMap(with(with(flatEvent("d"), "decision", secret), "rating", secret)), testLimits, testNow)
	if err == nil {
		t.Fatal("accepted")
	}
	if !strings.Contains(err.Error(), secret) {
		t.Fatalf("precondition: reason %q should quote the value", err)
	}
	got := logReason(err)
	if strings.Contains(got, secret) {
		t.Errorf("log reason %q contains a field value", got)
	}
	if !strings.Contains(got, "decision") || !strings.Contains(got, "rating") {
		t.Errorf("log reason %q does not name decision and rating", got)
	}
}

// encodeFuzzEntry writes fields as NUL-separated names and values, the
// fuzz target's input format.
func encodeFuzzEntry(pairs []any) []byte {
	var b bytes.Buffer
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(p.(string))
	}
	return b.Bytes()
}

func decodeFuzzEntry(in []byte) map[string]any {
	parts := bytes.Split(in, []byte{0})
	m := make(map[string]any, len(parts)/2)
	for i := 0; i+1 < len(parts); i += 2 {
		m[string(parts[i])] = string(parts[i+1])
	}
	return m
}

// FuzzDecodeEntry checks that DecodeEntry never panics and that what it
// accepts validates without panicking and, when valid, is a fixed point:
// validating again changes nothing, and its JSON form decodes to the same
// decision.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeFuzzEntry(flatEvent("d-1")))
	f.Add(encodeFuzzEntry(jsonEvent("d-1")))
	f.Add(encodeFuzzEntry(append(jsonEvent("d-1"), "schema_version", "1", "producer", "ui")))
	for _, b := range badEntries() {
		if b.fields != nil {
			f.Add(encodeFuzzEntry(b.fields))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		values := decodeFuzzEntry(in)
		d, err := DecodeEntry(values)
		if err != nil {
			var v *precept.ValidationError
			if !errors.As(err, &v) || len(v.Problems) == 0 {
				t.Fatalf("error %v is not a validation error with problems", err)
			}
			return
		}
		if err := d.Validate(precept.Limits{}, testNow); err != nil {
			return
		}
		again := d
		if err := again.Validate(precept.Limits{}, testNow); err != nil {
			t.Fatalf("valid decision fails a second validation: %v", err)
		}
		assertSameDecision(t, "revalidated", again, d)

		data, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal accepted decision: %v", err)
		}
		back, err := DecodeEntry(map[string]any{"data": string(data)})
		if err != nil {
			t.Fatalf("JSON form %s of an accepted decision does not decode: %v", data, err)
		}
		if err := back.Validate(precept.Limits{}, testNow); err != nil {
			t.Fatalf("JSON form %s of a valid decision is invalid: %v", data, err)
		}
		assertSameDecision(t, "JSON round trip", back, d)
	})
}

// assertSameDecision compares decisions, taking instants and empty
// collections as equal however they are represented.
func assertSameDecision(t *testing.T, what string, got, want precept.Decision) {
	t.Helper()
	if !got.Timestamp.Equal(want.Timestamp) {
		t.Fatalf("%s: timestamp %v, want %v", what, got.Timestamp, want.Timestamp)
	}
	norm := func(d precept.Decision) precept.Decision {
		d.Timestamp = time.Time{}
		if len(d.QualityScores) == 0 {
			d.QualityScores = nil
		}
		if len(d.Tags) == 0 {
			d.Tags = nil
		}
		if len(d.ErrorCategories) == 0 {
			d.ErrorCategories = nil
		}
		return d
	}
	if !reflect.DeepEqual(norm(got), norm(want)) {
		t.Fatalf("%s changed the decision:\ngot  %+v\nwant %+v", what, got, want)
	}
}

// testValue reads a counter or gauge, or a histogram's sample count.
func testValue(m prometheus.Metric) float64 {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		panic(err)
	}
	switch {
	case pb.Counter != nil:
		return pb.Counter.GetValue()
	case pb.Gauge != nil:
		return pb.Gauge.GetValue()
	case pb.Histogram != nil:
		return float64(pb.Histogram.GetSampleCount())
	}
	panic("unsupported metric type")
}
