package precept

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// Feedback is a stored decision with the fields precept derives from it
// (docs/formats.md, "The feedback record"). It is what the feedback store keeps in git, one file per
// decision.
type Feedback struct {
	Decision
	// ReceivedAt is when precept accepted the decision.
	ReceivedAt time.Time `json:"received_at"`
	// Source is "stream:<entry id>" or "api:<identity>".
	Source string `json:"source"`
	// Producer is who handed the decision to precept, as precept knows it
	// rather than as the decision says: "api:<token name>" or
	// "stream:<stream name>". Reviewer and epic ids are whatever a
	// recorder sends; distinct producers are not (docs/thresholds.md,
	// "Cluster support").
	Producer string `json:"producer,omitempty"`
	// EmbeddingText is what the similarity index embeds.
	EmbeddingText string `json:"embedding_text,omitempty"`
	// EditDistancePercent is the share of characters changed between the
	// agent's and the approved output, when both were sent.
	EditDistancePercent *int32 `json:"edit_distance_percent,omitempty"`
}

// NewFeedback derives a Feedback record from a validated decision.
func NewFeedback(d Decision, source string, receivedAt time.Time) Feedback {
	f := Feedback{
		Decision:      d,
		ReceivedAt:    receivedAt.UTC(),
		Source:        source,
		EmbeddingText: EmbeddingText(d),
	}
	if d.AgentOutput != "" && d.ApprovedOutput != "" {
		p := EditDistancePercent(d.AgentOutput, d.ApprovedOutput)
		f.EditDistancePercent = &p
	}
	return f
}

// ProducerName returns Producer, or for records stored before it was
// recorded, what Source tells: the API identity ("api:<name>", as new
// records say), or "" for a stream entry, whose stream name was not
// kept — an unknown producer counts toward no one's diversity, so the
// same stream is never counted twice across an upgrade.
func (f Feedback) ProducerName() string {
	switch {
	case f.Producer != "":
		return f.Producer
	case strings.HasPrefix(f.Source, "api:"):
		return f.Source
	}
	return ""
}

// maxSummaryLines bounds how much of a correction diff goes into the
// embedding text: the comment carries most of the meaning.
const maxSummaryLines = 12

// EmbeddingText returns the text similarity is computed on (docs/formats.md):
// the correction summary, then the reviewer comment.
func EmbeddingText(d Decision) string {
	var parts []string
	if s := CorrectionSummary(d.CorrectionDiff); s != "" {
		parts = append(parts, s)
	}
	if c := strings.TrimSpace(d.ReviewerComment); c != "" {
		parts = append(parts, c)
	}
	return strings.Join(parts, "\n")
}

// CorrectionSummary condenses a unified diff to the lines the reviewer
// removed and added, without headers, so it can be embedded.
func CorrectionSummary(diff string) string {
	if diff == "" {
		return ""
	}
	var out []string
	for _, line := range strings.Split(diff, "\n") {
		if strings.HasPrefix(line, "+++") || strings.HasPrefix(line, "---") {
			continue
		}
		if (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")) && len(strings.TrimSpace(line[1:])) > 0 {
			out = append(out, strings.TrimSpace(line))
			if len(out) == maxSummaryLines {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// Edit distance is computed character by character for outputs up to
// charDiffMax bytes and line by line (over at most maxDiffLines lines)
// above that. Myers' diff costs O(N·D), so bounding N bounds the work on
// any input — a review measured 22 ms for two entirely different 2 KiB
// outputs and 34 ms for 3,000 different lines, on the ingest path, so the
// bounds are 1 KiB and 500 lines; for large outputs the line diff counts
// the characters of the changed lines.
const (
	charDiffMax  = 1 << 10
	maxDiffLines = 500
)

// EditDistancePercent returns the share of characters changed between two
// texts, 0-100 (a character diff, as a percentage).
func EditDistancePercent(original, revised string) int32 {
	if original == revised {
		return 0
	}
	dmp := diffmatchpatch.New()
	// No timeout: with one, the library first tries an unbounded
	// "half-match" heuristic; the input bounds above bound the diff.
	dmp.DiffTimeout = 0
	var diffs []diffmatchpatch.Diff
	if len(original) <= charDiffMax && len(revised) <= charDiffMax {
		diffs = dmp.DiffMain(original, revised, false)
	} else {
		a, b, lines := dmp.DiffLinesToChars(firstLines(original, maxDiffLines), firstLines(revised, maxDiffLines))
		diffs = dmp.DiffCharsToLines(dmp.DiffMain(a, b, false), lines)
	}
	var total, changed int
	for _, d := range diffs {
		n := utf8.RuneCountInString(d.Text)
		total += n
		if d.Type != diffmatchpatch.DiffEqual {
			changed += n
		}
	}
	if total == 0 {
		return 0
	}
	return int32((changed*100 + total/2) / total)
}

func firstLines(s string, n int) string {
	end := 0
	for i := 0; i < n; i++ {
		j := strings.IndexByte(s[end:], '\n')
		if j < 0 {
			return s
		}
		end += j + 1
	}
	return s[:end]
}
