package safetext

import "fmt"

// Check applies the checks every text that enters a prompt passes, in
// order, and returns why s fails them, or "" when it passes: no control
// character (Control), no secret (Secret), no denylisted phrase (Denied,
// with extra). The reason completes a sentence whose subject is the text
// ("… contains the control character U+001B (ESC, escape)"); it names a
// secret's kind, never its value.
func Check(s string, extra []string) string {
	if r, _, ok := Control(s); ok {
		return ControlReason(r)
	}
	if kind := Secret(s); kind != "" {
		return SecretReason(kind)
	}
	if phrase := Denied(s, extra); phrase != "" {
		return DeniedReason(phrase)
	}
	return ""
}

// ControlReason says that a text holds the character r Control reported.
func ControlReason(r rune) string {
	return "contains the control character " + Describe(r) + "; control characters (other than line feed and tab) and bidirectional overrides are never accepted"
}

// SecretReason says that a text holds a secret of a kind.
func SecretReason(kind string) string {
	return "contains what looks like a secret (" + kind + "); it must never enter a prompt"
}

// DeniedReason says that a text holds a denylisted phrase.
func DeniedReason(phrase string) string {
	return fmt.Sprintf("contains the denylisted phrase %q", phrase)
}
