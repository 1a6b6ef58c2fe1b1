package slackapp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// The two actions of a proposal's buttons.
const (
	ActionApprove = "approve"
	ActionReject  = "reject"
)

// Slack's limits on what precept puts in a message or a modal.
const (
	maxButtonValue     = 2000
	maxPrivateMetadata = 3000
)

// ButtonValue is what an Approve or Reject button carries (docs/lifecycle.md, "Slack"):
// which proposal, at which revision the reviewer saw it, and the action.
type ButtonValue struct {
	ProposalID string `json:"proposal_id"`
	Revision   int    `json:"revision"`
	Action     string `json:"action"`
}

// Encode returns the button's value: JSON within Slack's 2000-character
// limit.
func (v ButtonValue) Encode() (string, error) {
	if err := v.validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode button value: %w", err)
	}
	if len(b) > maxButtonValue {
		return "", fmt.Errorf("encode button value: %d bytes, Slack allows %d", len(b), maxButtonValue)
	}
	return string(b), nil
}

// DecodeButtonValue parses and checks a button's value.
func DecodeButtonValue(s string) (ButtonValue, error) {
	var v ButtonValue
	if len(s) > maxButtonValue {
		return ButtonValue{}, fmt.Errorf("decode button value: longer than %d bytes", maxButtonValue)
	}
	if err := strictJSON([]byte(s), &v); err != nil {
		return ButtonValue{}, fmt.Errorf("decode button value: %w", err)
	}
	if err := v.validate(); err != nil {
		return ButtonValue{}, err
	}
	return v, nil
}

func (v ButtonValue) validate() error {
	switch {
	case !rulefmt.ValidProposalID(v.ProposalID):
		return fmt.Errorf("button value: %q is not a proposal id", text.Fit(v.ProposalID, 64))
	case v.Revision < 1:
		return fmt.Errorf("button value: revision %d is not positive", v.Revision)
	case v.Action != ActionApprove && v.Action != ActionReject:
		return fmt.Errorf("button value: unknown action %q", text.Fit(v.Action, 32))
	}
	return nil
}

// noteMeta is the note modal's private metadata: the button that opened
// it and the message it belongs to, so the submission can be routed and
// answered where the click happened.
type noteMeta struct {
	ButtonValue
	Channel   string `json:"channel"`
	MessageTS string `json:"message_ts"`
}

func (m noteMeta) encode() (string, error) {
	if err := m.validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode modal metadata: %w", err)
	}
	if len(b) > maxPrivateMetadata {
		return "", fmt.Errorf("encode modal metadata: %d bytes, Slack allows %d", len(b), maxPrivateMetadata)
	}
	return string(b), nil
}

func decodeNoteMeta(s string) (noteMeta, error) {
	var m noteMeta
	if len(s) > maxPrivateMetadata {
		return noteMeta{}, fmt.Errorf("decode modal metadata: longer than %d bytes", maxPrivateMetadata)
	}
	if err := strictJSON([]byte(s), &m); err != nil {
		return noteMeta{}, fmt.Errorf("decode modal metadata: %w", err)
	}
	if err := m.validate(); err != nil {
		return noteMeta{}, err
	}
	return m, nil
}

func (m noteMeta) validate() error {
	if err := m.ButtonValue.validate(); err != nil {
		return err
	}
	if !validSlackID(m.Channel) {
		return fmt.Errorf("modal metadata: %q is not a channel id", text.Fit(m.Channel, 32))
	}
	return nil
}

// strictJSON decodes exactly one JSON object with no unknown fields.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}

// validSlackID reports whether s looks like a Slack id (channel, user,
// team): upper-case letters and digits.
func validSlackID(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
