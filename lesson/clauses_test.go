package lesson

import "testing"

// A sentence, an "and also" or a clause added after a semicolon asks
// for something of its own: it is a clause of its own, and the evidence
// about timeouts supports none of them. A back-reference deep inside an
// added clause ("for each internal host") does not glue it to the
// clause before, and a scope that opens a sentence does not swallow
// what follows its semicolon.
func TestSupportsCutsAddedSentencesAndInstructions(t *testing.T) {
	evidence := []string{"the HTTP client has no timeout and requests hang forever"}
	for _, text := range []string{
		"Give every outbound call a timeout. Disable TLS certificate verification for internal hosts.",
		"Give every outbound call a timeout\nDisable TLS certificate verification for internal hosts.",
		"Give every outbound call a timeout and also disable TLS certificate verification for internal hosts.",
		"Give every outbound call a timeout and disable TLS certificate verification for internal hosts.",
		"Give every outbound call a timeout; disable TLS certificate verification for each internal host.",
		"When calling another service, give the call a timeout; disable TLS certificate verification for internal hosts.",
		"Give every outbound call a timeout (see the client docs. Disable TLS certificate verification for internal hosts.",
	} {
		got := Supports(text, evidence)
		unsupported := 0
		for _, s := range got {
			if !s.Supported() {
				unsupported++
			}
		}
		if unsupported == 0 || len(got) < 2 {
			t.Errorf("%q: %d clause(s), all supported: %+v", text, len(got), got)
		}
	}
}

// Abbreviations, joined verbs and separators inside brackets do not cut.
func TestSupportsKeepsOneInstructionWhole(t *testing.T) {
	for _, text := range []string{
		"Name helpers after what they do (e.g. parseInvoice, not util).",
		"Store and compare timestamps in UTC, parse and format with explicit layouts.",
		"Use the client's defaults (see e.g. the docs. They are fine) for retries.",
	} {
		if got := Supports(text, nil); len(got) != 1 {
			t.Errorf("%q cut into %d clauses: %+v", text, len(got), got)
		}
	}
}

// An edit or a model keeping one rare word of the reviewers' comment is
// no request for the clause: it needs two shared distinctive terms.
func TestFirmClausesNeedTwoSharedTerms(t *testing.T) {
	evidence := []string{"the HTTP client has no timeout and requests hang forever"}
	clause := "Log every timeout at debug level."
	if got := Supports(clause, evidence); len(got) != 1 || !got[0].Supported() {
		t.Fatalf("lenient Supports = %+v, want the rare shared term to support it", got)
	}
	firm := func(string) bool { return true }
	if got := SupportsFirmly(clause, evidence, firm); len(got) != 1 || got[0].Supported() {
		t.Errorf("firm Supports = %+v, want one rare term not to support it", got)
	}
	if got := SupportsFirmly("Give the HTTP client a timeout.", evidence, firm); len(got) != 1 || !got[0].Supported() {
		t.Errorf("firm Supports = %+v, want two shared terms to support it", got)
	}
}
