package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileEvent's comment tries to clear the screen, overwrite its own
// line with a fake approval, ring the bell, erase characters and reverse
// the text that follows.
const hostileEvent = `{"decision_id":"cli-esc","gate_id":"HITL-2","epic_id":"EPIC-3","agent":"coding-agent",
"decision":"REJECTED","reviewer_id":"mallory","timestamp":"2026-11-20T10:00:00Z",
"reviewer_comment":"looks fine\u001b[2J\rFAKE: approved by admin\u0007\b\b\u202eevil\u009b1m\nsecond line","tags":["reuse"]}`

// TestPrintedFieldsShowControlCharactersInsteadOfObeyingThem pins issue
// 10's fifth defect: what the CLI prints never holds a control character
// from a stored field; each one is shown escaped, and a line break in a
// field cannot start a line of its own.
func TestPrintedFieldsShowControlCharactersInsteadOfObeyingThem(t *testing.T) {
	addr, _ := server(t)
	file := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(file, []byte(hostileEvent), 0o644); err != nil {
		t.Fatal(err)
	}
	auth := []string{"--addr", addr, "--token", adminToken}
	if r := run("", append(auth, "feedback", "record", "-f", file)...); r.code != 0 {
		t.Fatalf("record: %+v", r)
	}
	for _, args := range [][]string{{"feedback", "get", "cli-esc"}, {"feedback", "list", "--agent", "coding-agent"}} {
		r := run("", append(auth, args...)...)
		if r.code != 0 {
			t.Fatalf("%s: %+v", args, r)
		}
		for _, c := range []string{"\x1b", "\r", "\x07", "\x08", "\u202e", "\u009b"} {
			if strings.Contains(r.stdout, c) {
				t.Errorf("%s prints %q raw:\n%s", args, c, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, `\x1b[2J`) {
			t.Errorf("%s does not show the escape sequence:\n%s", args, r.stdout)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(line, "FAKE") || strings.HasPrefix(line, "second line") {
				t.Errorf("%s lets a field start a line: %q", args, line)
			}
		}
	}
}

// TestJSONOutputNamesEnumValuesPlainly pins the last clause of issue 10's
// seventh defect: -o json prints "REJECTED", as the stream and the
// decision JSON spell it, not "VERDICT_REJECTED".
func TestJSONOutputNamesEnumValuesPlainly(t *testing.T) {
	addr, _ := server(t)
	file := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(file, []byte(hostileEvent), 0o644); err != nil {
		t.Fatal(err)
	}
	auth := []string{"--addr", addr, "--token", adminToken}
	if r := run("", append(auth, "feedback", "record", "-f", file)...); r.code != 0 {
		t.Fatalf("record: %+v", r)
	}
	r := run("", append(auth, "-o", "json", "feedback", "get", "cli-esc")...)
	var got struct {
		Feedback struct {
			Decision struct {
				Decision string `json:"decision"`
				Comment  string `json:"reviewer_comment"`
			} `json:"decision"`
		} `json:"feedback"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
		t.Fatalf("get -o json: %+v", r)
	}
	if got.Feedback.Decision.Decision != "REJECTED" || strings.Contains(r.stdout, "VERDICT_") {
		t.Fatalf("decision = %q; want REJECTED:\n%s", got.Feedback.Decision.Decision, r.stdout)
	}
	// The JSON keeps the comment exactly, escaped the JSON way.
	if !strings.HasPrefix(got.Feedback.Decision.Comment, "looks fine\x1b[2J\rFAKE") {
		t.Fatalf("comment = %q", got.Feedback.Decision.Comment)
	}
	for _, c := range []string{"\x1b", "\r", "\u202e", "\u009b"} {
		if strings.Contains(r.stdout, c) {
			t.Errorf("-o json prints %q raw", c)
		}
	}
}
