package precept

import (
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// Feedback is a stored decision with the fields precept derives from it
// (DESIGN.md §3). It is what the feedback store keeps in git, one file per
// decision.
type Feedback struct {
	Decision
	// ReceivedAt is when precept accepted the decision.
	ReceivedAt time.Time `json:"received_at"`
	// Source is "stream:<entry id>" or "api:<identity>".
	Source string `json:"source"`
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

// maxSummaryLines bounds how much of a correction diff goes into the
// embedding text: the comment carries most of the meaning.
const maxSummaryLines = 12

// EmbeddingText returns the text similarity is computed on (seed 004):
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

// maxDiffInput bounds the edit-distance computation, which is quadratic in
// the worst case; longer outputs are compared on their prefixes.
const maxDiffInput = 64 << 10

// EditDistancePercent returns the share of characters changed between two
// texts, 0-100 (seed 002: character diff, percent changed).
func EditDistancePercent(original, revised string) int32 {
	if len(original) > maxDiffInput {
		original = original[:maxDiffInput]
	}
	if len(revised) > maxDiffInput {
		revised = revised[:maxDiffInput]
	}
	if original == revised {
		return 0
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 200 * time.Millisecond
	diffs := dmp.DiffMain(original, revised, false)
	var total, changed int
	for _, d := range diffs {
		n := len([]rune(d.Text))
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
