package precept

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept/lib/jsonobj"
	"github.com/precept-dev/precept/lib/text"
)

// wireDecision is the JSON form of an event as producers send it: the
// timestamp stays a string so a bad one can be reported by name.
type wireDecision struct {
	DecisionID            string           `json:"decision_id"`
	GateID                string           `json:"gate_id"`
	EpicID                string           `json:"epic_id"`
	TaskID                string           `json:"task_id"`
	Agent                 string           `json:"agent"`
	Decision              string           `json:"decision"`
	ReviewerID            string           `json:"reviewer_id"`
	Timestamp             string           `json:"timestamp"`
	ReviewDurationSeconds *int64           `json:"review_duration_seconds"`
	AgentOutputSHA        string           `json:"agent_output_sha"`
	ApprovedOutputSHA     string           `json:"approved_output_sha"`
	CorrectionDiffPath    string           `json:"correction_diff_path"`
	CorrectionDiff        string           `json:"correction_diff"`
	AgentOutput           string           `json:"agent_output"`
	ApprovedOutput        string           `json:"approved_output"`
	ReviewerComment       string           `json:"reviewer_comment"`
	Tags                  []string         `json:"tags"`
	ScopePath             string           `json:"scope_path"`
	PromptVersion         string           `json:"prompt_version"`
	Rating                string           `json:"rating"`
	ErrorCategories       []string         `json:"error_categories"`
	QualityScores         map[string]int32 `json:"quality_scores"`
}

// ParseDecisionJSON decodes an event from its JSON form (the stream's
// `data` field, or a file for the CLI). It is strict: keys must be the
// event's field names exactly (encoding/json alone would match them in
// any case), no key may appear twice in any object, and unknown fields,
// invalid UTF-8, trailing data and wrongly typed fields are errors. The
// result is not yet validated; call Validate.
func ParseDecisionJSON(data []byte) (Decision, error) {
	d, _, err := ParseDecisionJSONWithEnvelope(data, nil)
	return d, err
}

// ParseDecisionJSONWithEnvelope is ParseDecisionJSON for an object that
// may also carry transport fields beside the event's: the names in
// envelope are allowed under the same rules, and their values are
// returned raw instead of being decoded.
func ParseDecisionJSONWithEnvelope(data []byte, envelope map[string]bool) (Decision, map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return Decision{}, nil, InvalidEvent("data", "not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Decision{}, nil, InvalidEvent("data", "must be a JSON object")
	}
	members, err := objectMembers(trimmed)
	if err != nil {
		return Decision{}, nil, err
	}
	v := &ValidationError{}
	event := make(map[string]json.RawMessage, len(members))
	var env map[string]json.RawMessage
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		switch {
		case seen[m.Name]:
			v.Add(m.Name, "duplicate field")
		case eventFields[m.Name]:
			event[m.Name] = m.Value
		case envelope[m.Name]:
			if env == nil {
				env = map[string]json.RawMessage{}
			}
			env[m.Name] = m.Value
		default:
			v.Add(m.Name, "unknown field%s", caseHint(m.Name, envelope))
		}
		seen[m.Name] = true
		if key, ok := duplicateKey(m.Value); ok {
			v.Add(m.Name, "duplicate key %q", text.Truncate(key, 64))
		}
	}
	if err := v.orNil(); err != nil {
		return Decision{}, nil, err
	}
	// Every key is now an exact, single field name, so encoding/json's
	// case-insensitive matching has nothing left to match loosely.
	exact, err := json.Marshal(event)
	if err != nil {
		return Decision{}, nil, InvalidEvent("data", "invalid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(exact))
	dec.DisallowUnknownFields()
	var w wireDecision
	if err := dec.Decode(&w); err != nil {
		return Decision{}, nil, jsonProblem(err)
	}
	d, err := w.decision()
	return d, env, err
}

// objectMembers splits a JSON object into its members, duplicates kept,
// and refuses anything after it.
func objectMembers(obj []byte) ([]jsonobj.Member, error) {
	members, err := jsonobj.Members(obj)
	switch {
	case errors.Is(err, jsonobj.ErrTrailing):
		return nil, InvalidEvent("data", "trailing data after the JSON object")
	case err != nil:
		return nil, jsonProblem(err)
	}
	return members, nil
}

// duplicateKey returns the first key that appears twice in one object
// anywhere inside a valid JSON value.
func duplicateKey(value json.RawMessage) (string, bool) {
	if !bytes.ContainsRune(value, '{') {
		return "", false
	}
	return firstDuplicate(json.NewDecoder(bytes.NewReader(value)))
}

func firstDuplicate(dec *json.Decoder) (string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return "", false
			}
			key, _ := k.(string)
			if seen[key] {
				return key, true
			}
			seen[key] = true
			if key, ok := firstDuplicate(dec); ok {
				return key, true
			}
		}
		_, _ = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if key, ok := firstDuplicate(dec); ok {
				return key, true
			}
		}
		_, _ = dec.Token()
	}
	return "", false
}

// caseHint names the field an unknown name differs from only in case.
func caseHint(name string, envelope map[string]bool) string {
	for _, names := range []map[string]bool{eventFields, envelope} {
		for known := range names {
			if strings.EqualFold(known, name) {
				return fmt.Sprintf(" (names are case-sensitive: did you mean %s?)", known)
			}
		}
	}
	return ""
}

// jsonProblem turns a json decoding error into a validation error that
// names the field where possible.
func jsonProblem(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return InvalidEvent(typeErr.Field, "wrong type: got JSON %s, want %s", typeErr.Value, jsonTypeName(typeErr.Type.Kind().String()))
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return InvalidEvent("data", "invalid JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return InvalidEvent("data", "invalid JSON: unexpected end of input")
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return InvalidEvent(strings.Trim(name, `"`), "unknown field")
	}
	return InvalidEvent("data", "invalid JSON: %s", strings.TrimPrefix(msg, "json: "))
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int64", "int32", "int":
		return "an integer"
	case "slice":
		return "an array"
	case "map":
		return "an object"
	}
	return "a " + kind
}

func (w wireDecision) decision() (Decision, error) {
	d := Decision{
		DecisionID:            w.DecisionID,
		GateID:                w.GateID,
		EpicID:                w.EpicID,
		TaskID:                w.TaskID,
		Agent:                 w.Agent,
		Decision:              Verdict(w.Decision),
		ReviewerID:            w.ReviewerID,
		ReviewDurationSeconds: w.ReviewDurationSeconds,
		AgentOutputSHA:        w.AgentOutputSHA,
		ApprovedOutputSHA:     w.ApprovedOutputSHA,
		CorrectionDiffPath:    w.CorrectionDiffPath,
		CorrectionDiff:        w.CorrectionDiff,
		AgentOutput:           w.AgentOutput,
		ApprovedOutput:        w.ApprovedOutput,
		ReviewerComment:       w.ReviewerComment,
		Tags:                  w.Tags,
		ScopePath:             w.ScopePath,
		PromptVersion:         w.PromptVersion,
		Rating:                w.Rating,
		ErrorCategories:       w.ErrorCategories,
		QualityScores:         w.QualityScores,
	}
	if w.Timestamp != "" {
		ts, err := ParseTimestamp(w.Timestamp)
		if err != nil {
			return Decision{}, InvalidEvent("timestamp", "%v", err)
		}
		d.Timestamp = ts
	}
	return d, nil
}

// ParseTimestamp parses an RFC 3339 timestamp as events carry it. The
// zero time is refused here, where it can still be told from a missing
// timestamp: a zero Decision.Timestamp means "absent".
func ParseTimestamp(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 timestamp: %q", text.Truncate(s, 64))
	}
	if err := CheckTimestamp(t); err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// ErrZeroTimestamp is the problem with a timestamp that was given but is
// the zero time.
var ErrZeroTimestamp = errors.New("0001-01-01T00:00:00Z is the zero time, out of range (before the year 2000)")

// CheckTimestamp refuses a timestamp that was given but is the zero time,
// which Validate could not tell from a missing one. Decoders call it on
// every timestamp they read.
func CheckTimestamp(t time.Time) error {
	if t.IsZero() {
		return ErrZeroTimestamp
	}
	return nil
}
