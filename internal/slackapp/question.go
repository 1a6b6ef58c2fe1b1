package slackapp

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/precept-dev/precept/lib/text"

	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/evaluator"
)

// maxReplyChars bounds a clarifying reply.
const maxReplyChars = 4000

// question is the text of a clarification question, listing the missing
// rubric attributes in plain words.
func (c *clarifier) question(r evaluator.NeedsReview, n int, action clarification.Action) string {
	var missing strings.Builder
	for _, m := range plainMissing(r.Missing) {
		missing.WriteString("\n• " + m)
	}
	of := fmt.Sprintf("_Question %d of %d._", n, c.clar.Options().MaxAttempts)
	switch action {
	case clarification.FollowUp:
		return fmt.Sprintf("Thanks. It is still unclear:%s\nCould you add that? %s", missing.String(), of)
	case clarification.Remind:
		return fmt.Sprintf("%s, a reminder: decision %s still needs%s\nPlease reply in this thread. %s", c.reviewerRef(r), code(r.DecisionID), missing.String(), of)
	}
	return fmt.Sprintf("%s, precept could not learn from your review of decision %s (agent %s):\n%s\nCould you reply in this thread with%s\n%s",
		c.reviewerRef(r), code(r.DecisionID), code(r.Agent), quote(text.Fit(r.Comment, 500)), missing.String(), of)
}

// reviewerRef mentions the reviewer when slack.reviewers maps them.
func (c *clarifier) reviewerRef(r evaluator.NeedsReview) string {
	if u := c.s.opts.Reviewers[r.ReviewerID]; validSlackID(u) {
		return "<@" + u + ">"
	}
	return "Reviewer " + code(r.ReviewerID)
}

// plainWords names the clarity rubric's attributes for reviewers.
var plainWords = map[string]string{
	"what_was_wrong":    "what was wrong with the output",
	"where":             "where the problem is (file, function, section or step)",
	"why":               "why it matters",
	"desired_behaviour": "what the agent should have done instead",
}

func plainMissing(missing []string) []string {
	if len(missing) == 0 {
		missing = []string{"what_was_wrong", "where", "why", "desired_behaviour"}
	}
	out := make([]string, len(missing))
	for i, m := range missing {
		if w, ok := plainWords[m]; ok {
			out[i] = w
		} else {
			out[i] = escape(strings.ReplaceAll(m, "_", " "))
		}
	}
	return out
}

// code renders an identifier as inline code, safely.
func code(s string) string {
	return "`" + strings.ReplaceAll(escape(text.Fit(s, 100)), "`", "'") + "`"
}

// slackMarkup matches Slack's <…> markup in message text: mentions,
// channel references, links.
var slackMarkup = regexp.MustCompile(`<([^<>]*)>`)

// cleanReply turns a Slack message's text into plain text: mentions and
// links are written out, entities unescaped, length bounded.
func cleanReply(msg string) string {
	msg = slackMarkup.ReplaceAllStringFunc(msg, func(m string) string {
		inner := m[1 : len(m)-1]
		target, label, hasLabel := strings.Cut(inner, "|")
		switch {
		case strings.HasPrefix(target, "@"), strings.HasPrefix(target, "!"):
			if hasLabel {
				return label
			}
			return target
		case strings.HasPrefix(target, "#"):
			if hasLabel {
				return "#" + label
			}
			return target
		case hasLabel:
			return label + " (" + target + ")"
		}
		return target
	})
	return text.Fit(strings.TrimSpace(unescape(msg)), maxReplyChars)
}
