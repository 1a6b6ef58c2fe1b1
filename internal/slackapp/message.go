package slackapp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/slack-go/slack"
)

// Block Kit limits (characters) that proposal messages stay within.
const (
	maxHeaderText   = 150
	maxSectionText  = 3000
	maxFieldText    = 2000
	maxFallbackText = 3000
	// maxConflictsShown bounds the conflict lines of a message.
	maxConflictsShown = 5
)

// The block and action ids of proposal messages and the note modal.
const (
	blockDecision  = "precept_decision"
	callbackNote   = "precept_note"
	blockNote      = "note"
	actionNote     = "note"
	maxNoteChars   = 3000
	blockNoteIntro = "intro"
)

// proposalMessage renders a proposal as Block Kit: the header names the
// agents and the rule type, then the rule, the evidence, conflicts and
// supersedes, the branch and review link, the approvals so far and —
// while the proposal waits for decisions — Approve and Reject buttons
// carrying its revision. Once decided, the buttons give way to the
// outcome: who, when, and the notes or reason. impact is the proposal's
// impact preview in one line, shown under the conflicts when not empty.
// It also returns the plain-text fallback Slack shows in notifications.
func proposalMessage(p rulefmt.Proposal, impact string) ([]slack.Block, string, error) {
	kind := "Rule proposal"
	switch p.Kind {
	case rulefmt.KindConsolidation:
		kind = "Consolidation proposal"
	case rulefmt.KindSunset:
		kind = "Sunset proposal"
	case rulefmt.KindReapprove:
		kind = "Re-approval request"
	case rulefmt.KindActivate:
		kind = "Activation proposal"
	}
	ruleLine := "*Rule* `" + p.ID + "`\n"
	if p.Kind.DecidesOnRule() {
		// The question is about an approved rule; name it.
		ruleLine = "*Rule* `" + p.RuleID + "` · proposal `" + p.ID + "`\n"
	}
	agents := strings.Join(p.Agents, ", ")
	if agents == "" {
		agents = "no agent"
	}
	typ := string(p.Type)
	if typ == "" {
		typ = string(rulefmt.Guideline)
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(text.Fit(fmt.Sprintf("%s for %s · %s", kind, agents, typ), maxHeaderText))),
		slack.NewSectionBlock(mrkdwn(text.Fit(ruleLine+quote(p.Content), maxSectionText)), nil, nil),
	}

	fields := []*slack.TextBlockObject{
		mrkdwn(fmt.Sprintf("*Evidence*\n%d %s", support(p), text.Plural(support(p), "decision", "decisions"))),
		mrkdwn(fmt.Sprintf("*Reviewers*\n%d distinct", len(p.Reviewers))),
		mrkdwn(fmt.Sprintf("*Epics*\n%d distinct", len(p.Epics))),
		mrkdwn(text.Fit("*Proposed by*\n"+escape(orDash(p.ProposedBy)), maxFieldText)),
	}
	if p.Priority != "" || p.Protected {
		pr := escape(orDash(p.Priority))
		if p.Protected {
			pr += fmt.Sprintf(" · protected: needs %d approvals", p.Required)
		}
		fields = append(fields, mrkdwn(text.Fit("*Priority*\n"+pr, maxFieldText)))
	}
	blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
	if s := strings.TrimSpace(p.EvidenceSummary); s != "" {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(text.Fit(escape(s), maxSectionText)), nil, nil))
	}
	if c := conflictText(p); c != "" {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(text.Fit(c, maxSectionText)), nil, nil))
	}
	if impact != "" {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(text.Fit("*Impact* "+escape(impact), maxSectionText)), nil, nil))
	}
	if ctx := reviewContext(p); len(ctx) > 0 {
		blocks = append(blocks, slack.NewContextBlock("", ctx...))
	}
	blocks = append(blocks, slack.NewDividerBlock())

	if p.Status == rulefmt.Pending {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(text.Fit(approvalLine(p), maxSectionText)), nil, nil))
		approve, err := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: ActionApprove}.Encode()
		if err != nil {
			return nil, "", err
		}
		reject, err := ButtonValue{ProposalID: p.ID, Revision: p.Revision, Action: ActionReject}.Encode()
		if err != nil {
			return nil, "", err
		}
		blocks = append(blocks, slack.NewActionBlock(blockDecision,
			slack.NewButtonBlockElement(ActionApprove, approve, plain("Approve")).WithStyle(slack.StylePrimary),
			slack.NewButtonBlockElement(ActionReject, reject, plain("Reject")).WithStyle(slack.StyleDanger),
		))
	} else {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(text.Fit(outcomeText(p), maxSectionText)), nil, nil))
	}

	fallback := fmt.Sprintf("%s %s for %s: %s (%s)", kind, p.ID, agents, text.Fit(text.OneLine(p.Content), 200), statusLine(p))
	return blocks, text.Fit(escape(fallback), maxFallbackText), nil
}

// fingerprint identifies what a message shows, so an unchanged message
// is not sent again.
func fingerprint(blocks []slack.Block, fallback string) (string, error) {
	b, err := json.Marshal(struct {
		B []slack.Block
		F string
	}{blocks, fallback})
	if err != nil {
		return "", fmt.Errorf("fingerprint a message: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

func support(p rulefmt.Proposal) int {
	if p.Support > 0 {
		return p.Support
	}
	return len(p.FeedbackIDs)
}

// approvalLine is "*Approvals:* k/N — alice, bob".
func approvalLine(p rulefmt.Proposal) string {
	names := make([]string, len(p.Approvals))
	for i, a := range p.Approvals {
		names[i] = escape(a.Approver)
	}
	who := "none yet"
	if len(names) > 0 {
		who = strings.Join(names, ", ")
	}
	return fmt.Sprintf("*Approvals:* %d/%d — %s", len(p.Approvals), p.Required, who)
}

// outcomeText says how a decided proposal ended: who decided, when, and
// with which notes or reason.
func outcomeText(p rulefmt.Proposal) string {
	var b strings.Builder
	switch p.Status {
	case rulefmt.Approved:
		fmt.Fprintf(&b, ":white_check_mark: *Approved* — %d/%d", len(p.Approvals), max(p.Required, len(p.Approvals)))
		for _, a := range p.Approvals {
			fmt.Fprintf(&b, "\n• %s%s %s", escape(a.Approver), via(a.Via), slackDate(a.At))
			if n := strings.TrimSpace(a.Note); n != "" {
				b.WriteString(": “" + text.Fit(escape(text.OneLine(n)), 300) + "”")
			}
		}
		switch {
		case p.MergedCommit != "":
			fmt.Fprintf(&b, "\nRule `%s` is on main (commit `%s`).", escape(p.RuleID), short(p.MergedCommit))
		default:
			fmt.Fprintf(&b, "\nRule `%s` waits to be merged into main.", escape(p.RuleID))
		}
	case rulefmt.Rejected:
		b.WriteString(":x: *Rejected*")
		if r := p.Rejection; r != nil {
			fmt.Fprintf(&b, " by %s%s %s\n%s", escape(r.Rejector), via(r.Via), slackDate(r.At), quote(r.Reason))
		}
	default:
		fmt.Fprintf(&b, "*%s* — no longer awaiting a decision.", escape(strings.ToLower(string(p.Status))))
	}
	return b.String()
}

func statusLine(p rulefmt.Proposal) string {
	switch p.Status {
	case rulefmt.Pending:
		return fmt.Sprintf("%d/%d approvals", len(p.Approvals), p.Required)
	case rulefmt.Rejected:
		if p.Rejection != nil {
			return "rejected by " + p.Rejection.Rejector
		}
		return "rejected"
	case rulefmt.Approved:
		return "approved"
	}
	return strings.ToLower(string(p.Status))
}

// conflictText lists what the proposal supersedes and conflicts with.
func conflictText(p rulefmt.Proposal) string {
	var lines []string
	if len(p.Supersedes) > 0 {
		lines = append(lines, "*Supersedes:* "+escape(strings.Join(p.Supersedes, ", ")))
	}
	if len(p.Conflicts) > 0 {
		lines = append(lines, "*Conflicts:*")
		for i, c := range p.Conflicts {
			if i == maxConflictsShown {
				lines = append(lines, fmt.Sprintf("• … and %d more", len(p.Conflicts)-i))
				break
			}
			line := fmt.Sprintf("• %s with `%s` (similarity %.2f)", escape(c.Kind), escape(c.OtherID), c.Similarity)
			if e := strings.TrimSpace(c.Explanation); e != "" {
				line += ": " + text.Fit(escape(text.OneLine(e)), 200)
			}
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// reviewContext is the branch, the review link and the revision.
func reviewContext(p rulefmt.Proposal) []slack.MixedElement {
	var out []slack.MixedElement
	if p.Branch != "" {
		out = append(out, mrkdwn("Branch `"+escape(p.Branch)+"`"))
	}
	if link := safeURL(p.ReviewURL); link != "" {
		out = append(out, mrkdwn("<"+link+"|Open the rule PR>"))
	}
	out = append(out, mrkdwn(fmt.Sprintf("Revision %d", p.Revision)))
	return out
}

// safeURL returns u when it is an http(s) URL that cannot break out of
// Slack's <url|text> link syntax, else "".
func safeURL(u string) string {
	if u == "" || strings.ContainsAny(u, "<>| \t\n") {
		return ""
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
		return ""
	}
	return u
}

func via(v string) string {
	if v == "" {
		return ""
	}
	return " via " + escape(v)
}

// slackDate renders t in each reader's time zone, with a UTC fallback.
func slackDate(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

func short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}

// escape makes text safe inside Slack mrkdwn: &, < and > are control
// characters there (<!channel>, <@U1>, links), so text written by
// reviewers or models can neither mention nor link.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// unescape reverses Slack's escaping of message text.
func unescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

// quote renders text as a mrkdwn block quote, escaped.
func quote(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "> (empty)"
	}
	lines := strings.Split(escape(s), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}
