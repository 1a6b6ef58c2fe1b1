// Package text holds the small text helpers several packages share:
// shortening text for messages, logs and tables, and plural words. Each
// clipping function says what it counts (bytes or runes) and whether the
// ellipsis counts towards the limit, because callers differ on both.
package text

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ellipsis marks where text was cut.
const Ellipsis = "…"

// Prefix returns the longest prefix of s of at most n bytes that ends on
// a rune boundary, and whether it is shorter than s.
func Prefix(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// Truncate shortens s to at most n bytes, cut on a rune boundary, and
// marks a cut with Ellipsis, which is not counted in n. It suits values
// quoted in errors, where the limit bounds what is echoed back.
func Truncate(s string, n int) string {
	if p, cut := Prefix(s, n); cut {
		return p + Ellipsis
	}
	return s
}

// TruncateTrim is Truncate that also trims white space from both ends of
// what it keeps when it cuts, so the ellipsis follows a word.
func TruncateTrim(s string, n int) string {
	if p, cut := Prefix(s, n); cut {
		return strings.TrimSpace(p) + Ellipsis
	}
	return s
}

// Fit shortens s to at most n runes, Ellipsis included: when s is longer
// it keeps n-1 runes. It suits fields with a hard length limit (Slack
// blocks, table columns).
func Fit(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + Ellipsis
}

// ClipRunes keeps the first n runes of s and marks a cut with Ellipsis,
// which is not counted in n.
func ClipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + Ellipsis
}

// ClipWords shortens s to at most n runes, at the last white space when
// that keeps more than half of them, drops trailing spaces and
// punctuation and marks the cut with Ellipsis (not counted in n).
func ClipWords(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	out := string([]rune(s)[:n])
	if cut := strings.LastIndexFunc(out, unicode.IsSpace); cut > n/2 {
		out = out[:cut]
	}
	return strings.TrimRightFunc(out, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) + Ellipsis
}

// OneLine collapses every run of white space in s, line breaks included,
// into one space and trims both ends.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Plural returns one when n is 1 and many otherwise.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// UpperFirst upper-cases the first letter of s.
func UpperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
