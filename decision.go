package precept

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept/lib/text"
)

// Verdict is what a human decided at a HITL gate.
type Verdict string

// The verdicts a decision event may carry.
const (
	Approved            Verdict = "APPROVED"
	Rejected            Verdict = "REJECTED"
	ApprovedWithChanges Verdict = "APPROVED_WITH_CHANGES"
)

// Valid reports whether v is one of the known verdicts.
func (v Verdict) Valid() bool {
	return v == Approved || v == Rejected || v == ApprovedWithChanges
}

// Negative reports whether the reviewer found something to correct.
func (v Verdict) Negative() bool { return v == Rejected || v == ApprovedWithChanges }

// Decision is one human decision at a HITL gate: the event producers write
// to the decision stream (docs/formats.md).
type Decision struct {
	DecisionID            string           `json:"decision_id"`
	GateID                string           `json:"gate_id"`
	EpicID                string           `json:"epic_id"`
	TaskID                string           `json:"task_id,omitempty"`
	Agent                 string           `json:"agent"`
	Decision              Verdict          `json:"decision"`
	ReviewerID            string           `json:"reviewer_id"`
	Timestamp             time.Time        `json:"timestamp"`
	ReviewDurationSeconds *int64           `json:"review_duration_seconds,omitempty"`
	AgentOutputSHA        string           `json:"agent_output_sha,omitempty"`
	ApprovedOutputSHA     string           `json:"approved_output_sha,omitempty"`
	CorrectionDiffPath    string           `json:"correction_diff_path,omitempty"`
	CorrectionDiff        string           `json:"correction_diff,omitempty"`
	AgentOutput           string           `json:"agent_output,omitempty"`
	ApprovedOutput        string           `json:"approved_output,omitempty"`
	ReviewerComment       string           `json:"reviewer_comment,omitempty"`
	Tags                  []string         `json:"tags,omitempty"`
	ScopePath             string           `json:"scope_path,omitempty"`
	PromptVersion         string           `json:"prompt_version,omitempty"`
	Rating                string           `json:"rating,omitempty"`
	ErrorCategories       []string         `json:"error_categories,omitempty"`
	QualityScores         map[string]int32 `json:"quality_scores,omitempty"`
}

// Limits bounds what a decision may carry. The zero value means the
// defaults of DefaultLimits.
type Limits struct {
	// MaxEventBytes bounds the encoded event as received.
	MaxEventBytes int
	// MaxCommentBytes bounds reviewer_comment.
	MaxCommentBytes int
	// MaxTextBytes bounds each of correction_diff, agent_output and
	// approved_output.
	MaxTextBytes int
	// MaxTags bounds tags and error_categories.
	MaxTags int
	// MaxFutureSkew is how far in the future a timestamp may lie.
	MaxFutureSkew time.Duration
	// GateAgents derives agent from gate_id when an event has none.
	GateAgents map[string]string
}

// DefaultLimits returns the limits used when none are configured.
func DefaultLimits() Limits {
	return Limits{
		MaxEventBytes:   1 << 20,
		MaxCommentBytes: 16 << 10,
		MaxTextBytes:    256 << 10,
		MaxTags:         32,
		MaxFutureSkew:   24 * time.Hour,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxEventBytes <= 0 {
		l.MaxEventBytes = d.MaxEventBytes
	}
	if l.MaxCommentBytes <= 0 {
		l.MaxCommentBytes = d.MaxCommentBytes
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = d.MaxTextBytes
	}
	if l.MaxTags <= 0 {
		l.MaxTags = d.MaxTags
	}
	if l.MaxFutureSkew <= 0 {
		l.MaxFutureSkew = d.MaxFutureSkew
	}
	return l
}

// ValidationError lists every problem found in a decision, each naming
// its field, so a producer can fix them all at once. It keeps at most
// MaxProblems of them and counts the rest, so an event with thousands of
// bad fields still gets a short reason.
type ValidationError struct {
	Problems []Problem
	// Omitted counts the problems found beyond MaxProblems.
	Omitted int
}

// MaxProblems is the most problems a ValidationError lists: more than a
// decision has fields, so only junk input reaches it.
const MaxProblems = 24

// maxFieldName bounds a field name quoted in a problem: unknown names come
// from the input.
const maxFieldName = 64

// Problem is one invalid field and why.
type Problem struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems), len(e.Problems)+1)
	for i, p := range e.Problems {
		if p.Field == "" {
			parts[i] = p.Reason
		} else {
			parts[i] = p.Field + ": " + p.Reason
		}
	}
	if e.Omitted > 0 {
		parts = append(parts, fmt.Sprintf("and %d more problems", e.Omitted))
	}
	return "invalid decision: " + strings.Join(parts, "; ")
}

// Is makes a validation error match any *Error with the Invalid code.
func (e *ValidationError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == Invalid
}

// As lets ErrorCode and ErrorMessage see a validation error as an Invalid
// *Error whose message lists the problems.
func (e *ValidationError) As(target any) bool {
	if t, ok := target.(**Error); ok {
		*t = &Error{Code: Invalid, Message: e.Error()}
		return true
	}
	return false
}

// Add records a problem with field, or only counts it once MaxProblems
// are listed.
func (e *ValidationError) Add(field, format string, args ...any) {
	if len(e.Problems) >= MaxProblems {
		e.Omitted++
		return
	}
	e.Problems = append(e.Problems, Problem{Field: text.Truncate(field, maxFieldName), Reason: fmt.Sprintf(format, args...)})
}

func (e *ValidationError) add(field, format string, args ...any) { e.Add(field, format, args...) }

func (e *ValidationError) orNil() error {
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}

// InvalidEvent returns a validation error with a single problem; decoders
// use it for events they cannot parse at all.
func InvalidEvent(field, format string, args ...any) error {
	e := &ValidationError{}
	e.add(field, format, args...)
	return e
}

var (
	idPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+-]*$`)
	agentPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	tagPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9._:/-]*$`)
	keyPattern   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	shaPattern   = regexp.MustCompile(`^[A-Za-z0-9:_-]+$`)
)

const (
	maxIDLen    = 128
	maxAgentLen = 64
	maxTagLen   = 64
	maxPathLen  = 1024
)

// eventFields is the set of field names an event may carry.
var eventFields = map[string]bool{
	"decision_id": true, "gate_id": true, "epic_id": true, "task_id": true,
	"agent": true, "decision": true, "reviewer_id": true, "timestamp": true,
	"review_duration_seconds": true, "agent_output_sha": true,
	"approved_output_sha": true, "correction_diff_path": true,
	"correction_diff": true, "agent_output": true, "approved_output": true,
	"reviewer_comment": true, "tags": true, "scope_path": true,
	"prompt_version": true, "rating": true, "error_categories": true,
	"quality_scores": true,
}

// IsEventField reports whether name is a field of the decision event.
func IsEventField(name string) bool { return eventFields[name] }

// Normalize trims surrounding space from identifiers, lower-cases tags and
// categories, sorts and de-duplicates them, derives agent from gate_id when
// the limits map it, and puts the timestamp in UTC. Validate calls it.
func (d *Decision) Normalize(l Limits) {
	for _, s := range []*string{&d.DecisionID, &d.GateID, &d.EpicID, &d.TaskID, &d.Agent, &d.ReviewerID,
		&d.AgentOutputSHA, &d.ApprovedOutputSHA, &d.CorrectionDiffPath, &d.ScopePath, &d.PromptVersion, &d.Rating} {
		*s = strings.TrimSpace(*s)
	}
	d.Decision = Verdict(strings.ToUpper(strings.TrimSpace(string(d.Decision))))
	d.Rating = strings.ToLower(d.Rating)
	if d.Agent == "" && l.GateAgents != nil {
		d.Agent = l.GateAgents[d.GateID]
	}
	d.Tags = normalizeSet(d.Tags)
	d.ErrorCategories = normalizeSet(d.ErrorCategories)
	if !d.Timestamp.IsZero() {
		d.Timestamp = d.Timestamp.UTC()
	}
}

func normalizeSet(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		s = strings.ToLower(strings.TrimSpace(s))
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// Validate normalizes d and checks every field against the event contract
// (docs/formats.md), returning a *ValidationError that lists all problems.
// now is the receive time, for the future-skew check.
func (d *Decision) Validate(l Limits, now time.Time) error {
	l = l.withDefaults()
	d.Normalize(l)
	v := &ValidationError{}
	d.checkWho(v)
	d.checkWhatAndWhen(v, l, now)
	d.checkContent(v, l)
	d.checkLabels(v, l)
	return v.orNil()
}

// checkWho checks the identifiers: the decision, its gate, epic and task,
// the reviewer and the agent.
func (d *Decision) checkWho(v *ValidationError) {
	checkID(v, "decision_id", d.DecisionID, true)
	checkID(v, "gate_id", d.GateID, true)
	checkID(v, "epic_id", d.EpicID, true)
	checkID(v, "task_id", d.TaskID, false)
	checkID(v, "reviewer_id", d.ReviewerID, true)
	switch {
	case d.Agent == "":
		v.add("agent", "required (and gate_id %q maps to no agent)", text.Truncate(d.GateID, 32))
	case !utf8.ValidString(d.Agent):
		v.add("agent", "not valid UTF-8")
	case len(d.Agent) > maxAgentLen:
		v.add("agent", "longer than %d bytes", maxAgentLen)
	case !agentPattern.MatchString(d.Agent):
		v.add("agent", "must start with a letter or digit and hold only letters, digits and . _ -")
	}
}

// checkWhatAndWhen checks the verdict, the timestamp against now and the
// review duration.
func (d *Decision) checkWhatAndWhen(v *ValidationError, l Limits, now time.Time) {
	switch {
	case d.Decision == "":
		v.add("decision", "required")
	case !d.Decision.Valid():
		v.add("decision", "must be APPROVED, REJECTED or APPROVED_WITH_CHANGES, got %q", text.Truncate(string(d.Decision), 32))
	}
	switch {
	case d.Timestamp.IsZero():
		v.add("timestamp", "required")
	case d.Timestamp.After(now.Add(l.MaxFutureSkew)):
		v.add("timestamp", "more than %s in the future", l.MaxFutureSkew)
	case d.Timestamp.Year() < 2000:
		v.add("timestamp", "before the year 2000")
	}
	if d.ReviewDurationSeconds != nil && *d.ReviewDurationSeconds < 0 {
		v.add("review_duration_seconds", "must not be negative")
	}
}

// checkContent checks what the decision is about: output hashes, the
// texts against their limits and the repository paths.
func (d *Decision) checkContent(v *ValidationError, l Limits) {
	for _, sha := range []struct{ field, val string }{{"agent_output_sha", d.AgentOutputSHA}, {"approved_output_sha", d.ApprovedOutputSHA}} {
		if sha.val != "" && (len(sha.val) > maxIDLen || !shaPattern.MatchString(sha.val)) {
			v.add(sha.field, "must be at most %d letters, digits and : _ -", maxIDLen)
		}
	}
	checkText(v, "reviewer_comment", d.ReviewerComment, l.MaxCommentBytes)
	checkText(v, "correction_diff", d.CorrectionDiff, l.MaxTextBytes)
	checkText(v, "agent_output", d.AgentOutput, l.MaxTextBytes)
	checkText(v, "approved_output", d.ApprovedOutput, l.MaxTextBytes)
	checkText(v, "prompt_version", d.PromptVersion, maxIDLen)
	checkPath(v, "scope_path", d.ScopePath)
	checkPath(v, "correction_diff_path", d.CorrectionDiffPath)
}

// checkLabels checks tags, error categories, the rating and the quality
// scores.
func (d *Decision) checkLabels(v *ValidationError, l Limits) {
	checkSet(v, "tags", d.Tags, l.MaxTags)
	checkSet(v, "error_categories", d.ErrorCategories, l.MaxTags)
	switch d.Rating {
	case "", "positive", "negative", "skipped":
	default:
		v.add("rating", "must be positive, negative or skipped, got %q", text.Truncate(d.Rating, 32))
	}
	if len(d.QualityScores) > l.MaxTags {
		v.add("quality_scores", "%d entries, more than the limit of %d", len(d.QualityScores), l.MaxTags)
	}
	for _, k := range slices.Sorted(maps.Keys(d.QualityScores)) {
		if !keyPattern.MatchString(k) || len(k) > maxTagLen {
			v.add("quality_scores", "key %q must be lower-case letters, digits and _", text.Truncate(k, 32))
		} else if s := d.QualityScores[k]; s < 0 || s > 100 {
			v.add("quality_scores", "%s is %d, want 0-100", k, s)
		}
	}
}

// checkID checks an identifier; an empty one is a problem only when
// required.
func checkID(v *ValidationError, field, val string, required bool) {
	switch {
	case val == "":
		if required {
			v.add(field, "required")
		}
	case !utf8.ValidString(val):
		v.add(field, "not valid UTF-8")
	case len(val) > maxIDLen:
		v.add(field, "longer than %d bytes", maxIDLen)
	case !idPattern.MatchString(val):
		v.add(field, "must start with a letter or digit and hold only letters, digits and . _ : @ + -")
	}
}

// checkText checks a free text against a limit in bytes.
func checkText(v *ValidationError, field, val string, max int) {
	switch {
	case !utf8.ValidString(val):
		v.add(field, "not valid UTF-8")
	case len(val) > max:
		v.add(field, "%d bytes, more than the limit of %d", len(val), max)
	case strings.ContainsRune(val, 0):
		v.add(field, "contains a NUL byte")
	}
}

// checkPath checks an optional repository-relative path.
func checkPath(v *ValidationError, field, p string) {
	if p == "" {
		return
	}
	if msg := relativePathProblem(p); msg != "" {
		v.add(field, "%s", msg)
	}
}

// checkSet checks a set of labels: at most max entries, each a short
// lower-case label. Only the first bad entry is reported.
func checkSet(v *ValidationError, field string, vals []string, max int) {
	if len(vals) > max {
		v.add(field, "%d entries, more than the limit of %d", len(vals), max)
		return
	}
	for _, t := range vals {
		if t == "" || len(t) > maxTagLen || !utf8.ValidString(t) || !tagPattern.MatchString(t) {
			v.add(field, "entry %q must be 1-%d lower-case letters, digits and . _ : / -", text.Truncate(t, 32), maxTagLen)
			return
		}
	}
}

// relativePathProblem says why p is not a clean repository-relative path,
// or returns "".
func relativePathProblem(p string) string {
	switch {
	case !utf8.ValidString(p):
		return "not valid UTF-8"
	case len(p) > maxPathLen:
		return fmt.Sprintf("longer than %d bytes", maxPathLen)
	case strings.ContainsAny(p, "\x00\\"):
		return "contains a NUL byte or a backslash"
	case strings.HasPrefix(p, "/"):
		return "must be relative, not absolute"
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "must not contain .."
		}
	}
	if path.Clean(p) != strings.TrimSuffix(p, "/") {
		return "must be a clean path (no ., // or trailing /)"
	}
	return ""
}

// CleanRelativePath checks that p is a clean repository-relative path
// without .. and returns an Invalid *Error naming field if not.
func CleanRelativePath(field, p string) error {
	if msg := relativePathProblem(p); msg != "" {
		return Errorf(Invalid, "%s: %s", field, msg)
	}
	return nil
}
