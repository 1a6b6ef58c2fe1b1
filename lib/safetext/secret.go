package safetext

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// secretPatterns recognise credentials by shape. Where a pattern has a
// group, only the group is the secret (the value of "password: …"); a
// redaction keeps the rest.
var secretPatterns = []struct {
	kind string
	// hints are strings one of which a match holds: without any of them
	// in the text, the expression is not run.
	hints []string
	re    *regexp.Regexp
}{
	{"private key", []string{"PRIVATE KEY"}, regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{"AWS access key id", []string{"AKIA", "ASIA"}, regexp.MustCompile(`(?:\b|_)((?:AKIA|ASIA)[0-9A-Z]{16})\b`)},
	{"GitHub token", []string{"gh", "github_pat_"}, regexp.MustCompile(`(?:\b|_)(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})`)},
	{"Slack token", []string{"xox"}, regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
	{"API secret key", []string{"k-", "k_"}, regexp.MustCompile(`\b(?:sk|rk|pk)[-_](?:live[-_]|test[-_]|proj[-_])?[A-Za-z0-9_-]{20,}`)},
	{"Google API key", []string{"AIza"}, regexp.MustCompile(`(?:\b|_)(AIza[0-9A-Za-z_-]{35})\b`)},
	{"JSON web token", []string{"eyJ"}, regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`)},
	{"credential assignment", nil, regexp.MustCompile(`(?i)\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)\s*[:=]\s*["']?([^\s"']{6,})`)},
	{"URL with credentials", []string{"://"}, regexp.MustCompile(`[a-z][a-z0-9+.-]*://[^/\s:@]+:([^/\s@]+)@`)},
}

// hinted reports whether s holds one of hints (or hints is empty).
func hinted(s string, hints []string) bool {
	if len(hints) == 0 {
		return true
	}
	for _, h := range hints {
		if strings.Contains(s, h) {
			return true
		}
	}
	return false
}

// longToken finds long unbroken runs of token characters.
var longToken = regexp.MustCompile(`[A-Za-z0-9+/=_-]{32,}`)

// highEntropy names a long random-looking token.
const highEntropy = "high-entropy token"

// Secret names the kind of secret s seems to hold ("AWS access key id",
// "GitHub token", …), or "". It reads s as written and as clean reads it
// (invisible characters removed, compatibility characters replaced), so
// "AKIA\u200bIOSFODNN7EXAMPLE" is still a key. The kind never repeats the
// secret.
func Secret(s string) string {
	if kind := secretIn(s); kind != "" {
		return kind
	}
	if c, _, _ := clean(s, false); c != s {
		if kind := secretIn(c); kind != "" {
			return kind
		}
	}
	// A key split by an HTML entity or empty markup ("AKIA&#8203;…",
	// "AKIA<b></b>…"): Redact then keeps nothing of such a text.
	if d := stripMarkup(decodeEntities(s), ""); d != s {
		if kind := secretIn(d); kind != "" {
			return kind
		}
		if c, _, _ := clean(d, false); c != d {
			return secretIn(c)
		}
	}
	return ""
}

func secretIn(s string) string {
	for _, p := range secretPatterns {
		if hinted(s, p.hints) && p.re.MatchString(s) && len(matches(p.re, s)) > 0 {
			return p.kind
		}
	}
	for _, tok := range longToken.FindAllString(s, -1) {
		if looksRandom(tok) {
			return highEntropy
		}
	}
	return ""
}

// matches returns the spans of the secrets re finds in s: its first group
// when it has one, else the whole match. A value that is already a
// redaction marker ("password: [redacted: …]") is not a secret.
func matches(re *regexp.Regexp, s string) [][2]int {
	var out [][2]int
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		if len(m) >= 4 && m[2] >= 0 {
			m = m[2:4]
		}
		if !strings.HasPrefix(s[m[0]:], "[redacted: ") && !reference.MatchString(s[m[0]:m[1]]) {
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	return out
}

// reference matches a value that names where a secret comes from rather
// than holding one: "$DB_PASSWORD", "${TOKEN}", "secrets.GITHUB_TOKEN",
// "{{ .Values.key }}", "<your-token>".
var reference = regexp.MustCompile(`^(?:\$\{?[A-Za-z_]|%[A-Za-z_]|\{\{|<[A-Za-z_-]+>?$|(?:secrets|env|vars|process\.env)\.[A-Za-z_])`)

// digest matches what rules cite without it being a secret: a git commit
// SHA in lower-case hex, and a UUID. 64 hex digits stay suspect: HMAC and
// webhook secrets look just like SHA-256 digests.
var digest = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`)

// looksRandom reports whether a long token mixes letters and digits the
// way keys and hashes do, rather than being a long identifier. Commit
// SHAs and UUIDs are not secrets: rules cite them
// ("pin actions to a full commit SHA").
func looksRandom(tok string) bool {
	if digest.MatchString(tok) {
		return false
	}
	var letters, digits, upper, lower int
	for _, r := range tok {
		switch {
		case unicode.IsDigit(r):
			digits++
		case unicode.IsUpper(r):
			letters++
			upper++
		case unicode.IsLower(r):
			letters++
			lower++
		}
	}
	return digits >= 4 && letters >= 4 && (upper > 0 && lower > 0 || digits*4 >= len(tok))
}

// Marker is what Redact puts in place of a secret of the given kind.
func Marker(kind string) string { return "[redacted: " + kind + "]" }

// Redact returns s with each secret Secret finds replaced by Marker of its
// kind, also when invisible characters split it: the whole span of s it
// was read from is replaced. Secret(Redact(s)) is "".
func Redact(s string) string {
	for range 4 {
		if Secret(s) == "" {
			return s
		}
		s = redactSpans(s, secretSpans(s), nil, nil)
		c, from, to := clean(s, true)
		if c != s {
			s = redactSpans(s, secretSpans(c), from, to)
		}
	}
	if kind := Secret(s); kind != "" {
		// Secrets that keep reappearing where others were cut out (never
		// seen in practice): nothing of the text is kept.
		return Marker(kind)
	}
	return s
}

// span is a secret found in a text: bytes [start, end) and its kind.
type span struct {
	start, end int
	kind       string
}

// secretSpans finds the secrets of s, in order and without overlaps.
func secretSpans(s string) []span {
	var out []span
	for _, p := range secretPatterns {
		if !hinted(s, p.hints) {
			continue
		}
		for _, m := range matches(p.re, s) {
			out = append(out, span{m[0], m[1], p.kind})
		}
	}
	for _, m := range longToken.FindAllStringIndex(s, -1) {
		if looksRandom(s[m[0]:m[1]]) {
			out = append(out, span{m[0], m[1], highEntropy})
		}
	}
	slices.SortFunc(out, func(a, b span) int { return a.start - b.start })
	var merged []span
	for _, sp := range out {
		if n := len(merged); n > 0 && sp.start < merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// redactSpans replaces the spans of s with markers. With from and to, the
// spans are of clean(s) and are mapped back to s first.
func redactSpans(s string, spans []span, from, to []int) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		start, end := sp.start, sp.end
		if from != nil {
			start, end = from[sp.start], to[sp.end-1]
		}
		if start < last {
			start = last
		}
		b.WriteString(s[last:start])
		b.WriteString(Marker(sp.kind))
		last = max(end, last)
	}
	b.WriteString(s[last:])
	return b.String()
}
