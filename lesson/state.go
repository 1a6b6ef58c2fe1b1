package lesson

import "regexp"

// What a reviewer says about themselves or the thread is not what they
// say about the output (docs/lessons.md, "The deterministic
// classifier"): "I'm puzzled by this patch", "I'm unsure", "not what I
// expected", "closing this", "why would we merge it?" name no defect, so
// a comment made only of them stays unclear, whatever topic word it
// mentions. They are patterns, not stop words: "I'm lost in all the
// commented-out blocks" keeps the commented-out blocks.
var reviewerState = regexp.MustCompile(`(?i)` +
	// The reviewer's state of mind, and what it is about.
	`\bi\s*(?:'|’)?\s*(?:am|m|was|get|got|feel|have\s+been|'?ve\s+been)\s+(?:a\s+bit\s+|quite\s+|so\s+|really\s+|very\s+|still\s+)?` +
	`(?:confused|unsure|not\s+sure|baffled|puzzled|lost|waiting)(?:\s+(?:by|about|with|on|for)\s+(?:this|the)\s+(?:pr|pull\s+request|change|patch))?` +
	// What they expected, and whether they are off.
	`|\b(?:doesn(?:'|’)?t|does\s+not|didn(?:'|’)?t)\s+(?:quite\s+|really\s+)?(?:feel|look|seem)\s+like\s+what\s+i\s+expected` +
	`|\bwhat\s+i\s+expected\b|\bif\s+i(?:'|’)?m\s+off\b` +
	// Thread actions.
	`|\bwhy\s+(?:should|would)\s+(?:it|this|we)\s+(?:be\s+)?merged?\b` +
	`|\bclosing\s+(?:this|it|the\s+pr|the\s+pull\s+request)\b` +
	`|\bwaiting\s+for\s+(?:someone|somebody|others?|more\s+people)(?:\s+else)?(?:\s+to\s+(?:comment|chime\s+in|weigh\s+in|review))?` +
	`|\bnot\s+(?:a\s+)?relevant\s+(?:change\s+)?(?:for|to)\s+this\s+(?:repo|repository|project)\b`)

// withoutReviewerState is a comment without what it says about the
// reviewer or the thread.
func withoutReviewerState(comment string) string {
	if !reviewerState.MatchString(comment) {
		return comment
	}
	return reviewerState.ReplaceAllString(comment, " ")
}
