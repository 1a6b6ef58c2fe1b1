package slackapp

import (
	"strings"
	"testing"
)

func TestButtonValueRoundTripsWithinSlacksLimit(t *testing.T) {
	for _, v := range []ButtonValue{
		{ProposalID: "p-01jd5v7w9k3m2n4p6q8r0s2t4v", Revision: 1, Action: ActionApprove},
		{ProposalID: "p-" + strings.Repeat("z", 40), Revision: 1 << 30, Action: ActionReject},
	} {
		s, err := v.Encode()
		if err != nil {
			t.Fatalf("Encode(%+v): %v", v, err)
		}
		if len(s) > maxButtonValue {
			t.Fatalf("value of %d bytes exceeds %d", len(s), maxButtonValue)
		}
		got, err := DecodeButtonValue(s)
		if err != nil || got != v {
			t.Fatalf("round trip of %+v = %+v, %v", v, got, err)
		}
	}
}

func TestMalformedButtonValuesAreRefused(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"empty", ""},
		{"not JSON", "approve p-123456"},
		{"unknown action", `{"proposal_id":"p-0123456789","revision":1,"action":"merge"}`},
		{"missing action", `{"proposal_id":"p-0123456789","revision":1}`},
		{"bad proposal id", `{"proposal_id":"../etc/passwd","revision":1,"action":"approve"}`},
		{"zero revision", `{"proposal_id":"p-0123456789","revision":0,"action":"approve"}`},
		{"negative revision", `{"proposal_id":"p-0123456789","revision":-3,"action":"approve"}`},
		{"string revision", `{"proposal_id":"p-0123456789","revision":"1","action":"approve"}`},
		{"unknown field", `{"proposal_id":"p-0123456789","revision":1,"action":"approve","admin":true}`},
		{"trailing data", `{"proposal_id":"p-0123456789","revision":1,"action":"approve"} {}`},
		{"too long", `{"proposal_id":"p-0123456789","revision":1,"action":"approve","x":"` + strings.Repeat("a", 2100) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := DecodeButtonValue(tc.value); err == nil {
				t.Fatalf("DecodeButtonValue(%q) = %+v, want an error", tc.value, v)
			}
		})
	}
}

func TestEncodeRefusesAnInvalidButtonValue(t *testing.T) {
	if _, err := (ButtonValue{ProposalID: "p-0123456789", Revision: 1, Action: "delete"}).Encode(); err == nil {
		t.Fatal("encoded an unknown action")
	}
}

func TestNoteMetadataNeedsAChannelID(t *testing.T) {
	good := noteMeta{ButtonValue: ButtonValue{ProposalID: "p-0123456789", Revision: 2, Action: ActionReject}, Channel: "C0RULES", MessageTS: "1.2"}
	s, err := good.encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeNoteMeta(s); err != nil || got != good {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	bad := good
	bad.Channel = "<!channel>"
	if _, err := bad.encode(); err == nil {
		t.Fatal("encoded metadata with a channel that is not an id")
	}
	if _, err := decodeNoteMeta(`{"proposal_id":"p-0123456789","revision":2,"action":"reject","channel":"<!channel>","message_ts":"1.2"}`); err == nil {
		t.Fatal("accepted metadata with a channel that is not an id")
	}
}
