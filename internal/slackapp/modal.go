package slackapp

import (
	"fmt"
	"strings"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/slack-go/slack"
)

// noteModal is the dialog a button click opens (docs/lifecycle.md, "Slack"): one
// optional multi-line note. Submitting it without a note approves or
// rejects plainly; with one, the note is kept as a tuning example and,
// for a rejection, is the reason. p may be nil when the proposal could
// not be read in time; the submission checks it again.
func noteModal(meta noteMeta, identity string, p *rulefmt.Proposal) (slack.ModalViewRequest, error) {
	md, err := meta.encode()
	if err != nil {
		return slack.ModalViewRequest{}, err
	}
	title, submit, label, hint := "Approve rule", "Approve", "Note (optional)",
		"Kept with the approval as a tuning example for the agent."
	if meta.Action == ActionReject {
		title, submit, label = "Reject rule", "Reject", "Reason (optional)"
		hint = fmt.Sprintf("The rejection reason, kept as a tuning example. Without one it is “%s”.", noReasonText(identity))
	}
	intro := fmt.Sprintf("You are about to %s `%s` as *%s*.", meta.Action, meta.ProposalID, escape(identity))
	if p != nil {
		intro += "\n" + quote(text.Fit(strings.TrimSpace(p.Content), 600))
	}
	input := slack.NewPlainTextInputBlockElement(plain("Why?"), actionNote)
	input.Multiline = true
	input.MaxLength = maxNoteChars
	note := slack.NewInputBlock(blockNote, plain(label), plain(text.Fit(hint, 150)), input)
	note.Optional = true
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		CallbackID:      callbackNote,
		Title:           plain(title),
		Submit:          plain(submit),
		Close:           plain("Cancel"),
		PrivateMetadata: md,
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(mrkdwn(text.Fit(intro, maxSectionText)), nil, nil, slack.SectionBlockOptionBlockID(blockNoteIntro)),
			note,
		}},
	}, nil
}

// noReasonText is the reason recorded for a rejection made without a
// note: the rule manager requires one.
func noReasonText(identity string) string {
	return "rejected in Slack by " + identity + " without a note"
}

// submittedNote returns the note of a submitted modal, trimmed.
func submittedNote(v slack.View) string {
	if v.State == nil {
		return ""
	}
	return strings.TrimSpace(v.State.Values[blockNote][actionNote].Value)
}
