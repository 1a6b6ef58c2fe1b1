package stream

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
)

// dataField holds the whole event as one JSON object.
const dataField = "data"

// schemaVersion is the only event schema version this consumer reads.
const schemaVersion = "1"

// envelopeFields are transport fields producers may add to either
// encoding; they are checked (schema_version) or ignored, never stored.
var envelopeFields = map[string]bool{
	"event_type":     true,
	"producer":       true,
	"traceparent":    true,
	"schema_version": true,
}

// DecodeEntry decodes the fields of one stream entry into a decision. An
// entry is either one field "data" holding the event as a JSON object, or
// the event's fields flat: strings, with tags and error_categories as JSON
// arrays, quality_scores as a JSON object, review_duration_seconds a
// decimal integer and timestamp RFC 3339. Envelope fields (event_type,
// producer, traceparent, schema_version) may accompany either encoding;
// schema_version, when present, must be "1". Any other field, data mixed
// with flat fields, a value that is not a string, or invalid UTF-8 in a
// name or value is an error.
//
// Errors are *precept.ValidationError naming the fields at fault. The
// decision is not validated; call (*precept.Decision).Validate.
func DecodeEntry(values map[string]any) (precept.Decision, error) {
	if len(values) == 0 {
		return precept.Decision{}, precept.InvalidEvent("entry", "has no fields")
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)

	v := &precept.ValidationError{}
	add := v.Add
	var (
		data    string
		hasData bool
		flat    = make(map[string]string, len(values))
	)
	for _, name := range names {
		if !utf8.ValidString(name) {
			add(strconv.Quote(name), "field name is not valid UTF-8")
			continue
		}
		value, ok := fieldString(values[name])
		switch {
		case !ok:
			add(name, "value is not a string")
			continue
		case !utf8.ValidString(value):
			add(name, "not valid UTF-8")
			continue
		}
		switch {
		case name == dataField:
			data, hasData = value, true
		case name == "schema_version":
			if value != schemaVersion {
				add(name, "must be %q, got %q", schemaVersion, text.Truncate(value, 16))
			}
		case envelopeFields[name]:
		case precept.IsEventField(name):
			flat[name] = value
		default:
			add(name, "unknown field")
		}
	}
	if hasData {
		for _, name := range names {
			if _, ok := flat[name]; ok {
				add(name, "flat event field mixed with data: send the event either in data or flat")
			}
		}
	}
	if len(v.Problems) > 0 {
		return precept.Decision{}, v
	}
	if hasData {
		return decodeData(data)
	}
	return decodeFlat(flat)
}

// fieldString accepts the value types a Redis client returns for a field.
func fieldString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// decodeData decodes the JSON form. Envelope fields a producer put inside
// the object obey the same rules as the event's (exact names, no
// duplicates) and are checked, never stored.
func decodeData(data string) (precept.Decision, error) {
	d, envelope, err := precept.ParseDecisionJSONWithEnvelope([]byte(data), envelopeFields)
	if err != nil {
		return precept.Decision{}, err
	}
	if version, ok := envelope["schema_version"]; ok {
		var s string
		if json.Unmarshal(version, &s) != nil || s != schemaVersion {
			return precept.Decision{}, precept.InvalidEvent("schema_version", "must be %q, got %s", schemaVersion, text.Truncate(string(version), 16))
		}
	}
	return d, nil
}

// decodeFlat decodes the flat form: one stream field per event field. An
// empty optional list, object or number counts as absent.
func decodeFlat(f map[string]string) (precept.Decision, error) {
	d := precept.Decision{
		DecisionID:         f["decision_id"],
		GateID:             f["gate_id"],
		EpicID:             f["epic_id"],
		TaskID:             f["task_id"],
		Agent:              f["agent"],
		Decision:           precept.Verdict(f["decision"]),
		ReviewerID:         f["reviewer_id"],
		AgentOutputSHA:     f["agent_output_sha"],
		ApprovedOutputSHA:  f["approved_output_sha"],
		CorrectionDiffPath: f["correction_diff_path"],
		CorrectionDiff:     f["correction_diff"],
		AgentOutput:        f["agent_output"],
		ApprovedOutput:     f["approved_output"],
		ReviewerComment:    f["reviewer_comment"],
		ScopePath:          f["scope_path"],
		PromptVersion:      f["prompt_version"],
		Rating:             f["rating"],
	}
	v := &precept.ValidationError{}
	add := v.Add
	if s := f["timestamp"]; s != "" {
		ts, err := precept.ParseTimestamp(s)
		if err != nil {
			add("timestamp", "%v", err)
		}
		d.Timestamp = ts
	}
	if s := f["review_duration_seconds"]; s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			add("review_duration_seconds", "must be a decimal integer, got %q", text.Truncate(s, 32))
		} else {
			d.ReviewDurationSeconds = &n
		}
	}
	for field, dst := range map[string]*[]string{"tags": &d.Tags, "error_categories": &d.ErrorCategories} {
		if s := f[field]; s != "" && json.Unmarshal([]byte(s), dst) != nil {
			add(field, "must be a JSON array of strings")
		}
	}
	if s := f["quality_scores"]; s != "" && json.Unmarshal([]byte(s), &d.QualityScores) != nil {
		add("quality_scores", "must be a JSON object of integer scores")
	}
	if len(v.Problems) > 0 {
		sort.SliceStable(v.Problems, func(i, j int) bool { return v.Problems[i].Field < v.Problems[j].Field })
		return precept.Decision{}, v
	}
	return d, nil
}

// entrySize is the size of an entry as received: its names and values.
func entrySize(values map[string]any) int {
	n := 0
	for name, value := range values {
		s, _ := fieldString(value)
		n += len(name) + len(s)
	}
	return n
}

// validate decodes and validates an entry under limits, as the consumer
// accepts it.
func validate(values map[string]any, limits precept.Limits, now time.Time) (precept.Decision, error) {
	if n := entrySize(values); n > limits.MaxEventBytes {
		return precept.Decision{}, precept.InvalidEvent("event", "%d bytes, more than the limit of %d", n, limits.MaxEventBytes)
	}
	d, err := DecodeEntry(values)
	if err != nil {
		return precept.Decision{}, err
	}
	if err := d.Validate(limits, now); err != nil {
		return precept.Decision{}, err
	}
	return d, nil
}
