package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Control returns the first character of s that rule text must not hold,
// and its byte offset: a control character other than line feed and tab
// (a carriage return is allowed only before a line feed), or a
// bidirectional embedding, override or isolate, which make a terminal or
// a review tool show text in another order than an agent reads it. A byte
// that is not UTF-8 is reported as utf8.RuneError. ok is false when s has
// none of them.
func Control(s string) (r rune, at int, ok bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' && c != '\t' && !(c == '\r' && i+1 < len(s) && s[i+1] == '\n') || c == 0x7f {
				return rune(c), i, true
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || isC1(r) || isBidiControl(r) {
			return r, i, true
		}
		i += n
	}
	return 0, 0, false
}

// isC1 reports the C1 control characters U+0080..U+009F; some terminals
// obey them as they obey ESC sequences.
func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

// isBidiControl reports the bidirectional embeddings, overrides and
// isolates (U+202A..U+202E, U+2066..U+2069). The marks (U+200E, U+200F,
// U+061C) reorder nothing by themselves and are allowed in text.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// controlNames name the control characters people recognise.
var controlNames = map[rune]string{
	0x00: "NUL", 0x07: "BEL, the bell", 0x08: "BS, backspace", 0x0b: "VT, vertical tab", 0x0c: "FF, form feed",
	0x0d: "CR, carriage return", 0x1b: "ESC, escape", 0x7f: "DEL", 0x9b: "CSI, a C1 control",
	0x202a: "LEFT-TO-RIGHT EMBEDDING", 0x202b: "RIGHT-TO-LEFT EMBEDDING", 0x202c: "POP DIRECTIONAL FORMATTING",
	0x202d: "LEFT-TO-RIGHT OVERRIDE", 0x202e: "RIGHT-TO-LEFT OVERRIDE", 0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE", 0x2069: "POP DIRECTIONAL ISOLATE",
}

// Describe names a character Control reports, e.g. "U+001B (ESC, escape)".
func Describe(r rune) string {
	switch name, ok := controlNames[r]; {
	case ok:
		return fmt.Sprintf("U+%04X (%s)", r, name)
	case r == utf8.RuneError:
		return "a byte that is not UTF-8"
	case isC1(r):
		return fmt.Sprintf("U+%04X (a C1 control)", r)
	}
	return fmt.Sprintf("U+%04X", r)
}

// StripControls removes terminal escape sequences (ESC [ … and the like)
// and every character Control reports from s; carriage returns become
// line feeds. It suits untrusted text that is quoted or drafted from, not
// text that must be refused.
func StripControls(s string) string {
	if _, _, bad := Control(s); !bad {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b || r == 0x9b:
			i += escapeSequenceLen(s[i:])
			continue
		case r == '\r':
			b.WriteByte('\n')
		case r == utf8.RuneError && n == 1, r < 0x20 && r != '\n' && r != '\t', r == 0x7f, isC1(r), isBidiControl(r):
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// escapeSequenceLen returns the length of the terminal escape sequence s
// starts with (s[0] is ESC or the C1 CSI): a control sequence up to its
// final byte, an operating-system command up to BEL or ESC \, or ESC and
// one more character.
func escapeSequenceLen(s string) int {
	i, csi := 1, false
	if strings.HasPrefix(s, "\u009b") {
		i, csi = len("\u009b"), true
	} else if len(s) > 1 && s[1] == '[' {
		i, csi = 2, true
	}
	switch {
	case csi:
		// Parameter and intermediate bytes (0x20..0x3F), then one final
		// byte (0x40..0x7E); anything else ends a malformed sequence.
		for ; i < len(s); i++ {
			switch c := s[i]; {
			case c >= 0x40 && c <= 0x7e:
				return i + 1
			case c < 0x20 || c > 0x7e:
				return i
			}
		}
		return i
	case len(s) > 1 && s[1] == ']':
		for i = 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return i
	case len(s) > 1 && s[1] >= 0x20 && s[1] < 0x7f:
		return 2
	}
	return 1
}

// Escape returns s with every character that could drive a terminal or
// hide text written out visibly: control characters other than line feed
// and tab as \xHH (C0 and DEL) or \u00HH (C1), format characters
// (zero-width characters, bidirectional controls, tag characters…) and
// line and paragraph separators as \uHHHH or \UHHHHHHHH, and bytes that
// are not UTF-8 as \xHH. s is returned as is when it holds none.
func Escape(s string) string { return escape(s, false) }

// EscapeLine is Escape that writes line feeds and tabs out too, for
// values printed on one line.
func EscapeLine(s string) string { return escape(s, true) }

func escape(s string, line bool) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if mustEscape(r, n, line) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !mustEscape(r, n, line):
			b.WriteString(s[i : i+n])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

// mustEscape reports whether the rune r (of n bytes) is written out.
func mustEscape(r rune, n int, line bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return line
	case r < 0x20 || r == 0x7f || isC1(r):
		return true
	case r < utf8.RuneSelf:
		return false
	case r == utf8.RuneError && n == 1:
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}
