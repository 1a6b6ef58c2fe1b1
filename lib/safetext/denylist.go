package safetext

import (
	"encoding/base64"
	"html"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// builtinDenylist are phrases that must never enter a prompt: the common
// prompt-injection and role-hijacking strings.
var builtinDenylist = []string{
	"ignore previous instructions", "ignore all previous", "ignore the previous", "ignore prior instructions",
	"ignore the above", "ignore all instructions", "ignore your instructions", "disregard previous",
	"disregard all previous", "disregard the above", "disregard prior", "disregard your instructions",
	"forget your instructions", "forget all previous", "forget everything above", "override your instructions",
	"new instructions follow", "you are now", "from now on you are", "pretend to be", "act as if you have no",
	"reveal your system prompt", "print your system prompt", "show your system prompt",
	"developer mode", "jailbreak", "do anything now", "dan mode", "without any restrictions",
	"bypass your safety", "bypass the safety", "disable safety", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
	"[inst]", "[/inst]", "<<sys>>", "### system", "begin system prompt",
}

// Bounds on the base64 runs Denied decodes: how deep wrapped text is
// unwrapped, how many runs of one text are decoded, and the shortest run
// worth decoding (12 bytes of text).
const (
	maxBase64Depth = 2
	maxBase64Runs  = 64
	minBase64Len   = 16
)

// Denied returns the first phrase of the built-in denylist, then of
// extra, that s contains, or "". Matching ignores case, punctuation and
// spacing, and compares folded text (Fold) in several readings, so that
// a phrase is found however it is disguised:
//
//   - as written;
//   - with HTML entities decoded and markup removed: HTML tags and
//     comments, Markdown emphasis and code marks (* _ ~ `), backslashes
//     and terminal escape sequences, once dropped ("ig<b></b>nore",
//     "i**g**nore") and once read as spaces ("ignore<br>previous");
//   - with letters spelled out one by one joined ("i g n o r e");
//   - inside base64-looking runs, decoded (twice at most).
func Denied(s string, extra []string) string {
	builtin := builtinForms()
	phrases, shown := builtin.forms, builtin.shown
	if len(extra) > 0 {
		phrases, shown = slices.Clone(phrases), slices.Clone(shown)
		for _, p := range extra {
			if n := phraseForm(p); n != "" {
				phrases = append(phrases, n)
				shown = append(shown, strings.TrimSpace(p))
			}
		}
	}
	switch i := denied(s, phrases, maxBase64Depth); {
	case i == overridePattern:
		return overrideShown
	case i >= 0:
		return shown[i]
	}
	return ""
}

// overridePattern is what denied returns when an instruction-override
// sentence matched rather than a listed phrase: "ignore all prior
// instructions", "disregard the earlier prompt" and the like, in any of
// the words such sentences use.
const overridePattern = -2

const overrideShown = "ignore/disregard … instructions"

var override = regexp.MustCompile(` (?:ignore|disregard|forget|override|bypass) (?:(?:all|any|of|the|your|my|these|those|every|previous|prior|earlier|above|preceding|former|original|system|initial|old|other) ){0,4}(?:instructions|instruction|prompts|prompt|directives) `)

// minSqueezed is the least number of letters a phrase needs to be matched
// squeezed (see squeeze): shorter ones would match across word
// boundaries by chance.
const minSqueezed = 14

// squeezed is a normalized text with only its letters kept, the digits
// that stand in for letters read as those letters ("ign0re", "1gnore"),
// so that "Ig-nore", "ig.nore", "ig nore" and "i-g-n-o-r-e p-r-e-v" all
// read as the phrase they split. starts and ends mark the bytes that
// begin and end a word of the text: a phrase matches only from the start
// of a word to the end of one, so an identifier such as
// "newInstructionsFollowUp" does not read as "new instructions follow".
type squeezed struct {
	s            string
	starts, ends []bool
}

func squeeze(norm string) squeezed {
	var b []byte
	var q squeezed
	inWord := false
	for _, r := range norm {
		var c byte
		switch {
		case r >= 'a' && r <= 'z':
			c = byte(r)
		case r >= '0' && r <= '9':
			c = leet[r-'0']
		}
		if r == ' ' {
			if inWord && len(q.ends) > 0 {
				q.ends[len(q.ends)-1] = true
			}
			inWord = false
			continue
		}
		if c == 0 {
			continue
		}
		b = append(b, c)
		q.starts = append(q.starts, !inWord)
		q.ends = append(q.ends, false)
		inWord = true
	}
	if inWord && len(q.ends) > 0 {
		q.ends[len(q.ends)-1] = true
	}
	q.s = string(b)
	return q
}

// contains reports whether phrase (squeezed) occurs from the start of a
// word to the end of one.
func (q squeezed) contains(phrase string) bool {
	for from := 0; ; {
		i := strings.Index(q.s[from:], phrase)
		if i < 0 {
			return false
		}
		i += from
		if q.starts[i] && q.ends[i+len(phrase)-1] {
			return true
		}
		from = i + 1
	}
}

// leet maps digits to the letters they stand in for.
var leet = [10]byte{'o', 'i', 0, 'e', 'a', 's', 0, 't', 0, 0}

// phraseList is a denylist as matched (forms) and as named (shown).
type phraseList struct{ forms, shown []string }

// builtin is the built-in denylist as matched, computed on first use. A
// function rather than a sync.OnceValue variable, so that a program that
// never matches (the CLI) links neither folding nor the confusables
// table.
var builtin struct {
	once sync.Once
	list phraseList
}

func builtinForms() phraseList {
	builtin.once.Do(func() {
		for _, p := range builtinDenylist {
			builtin.list.forms = append(builtin.list.forms, phraseForm(p))
			builtin.list.shown = append(builtin.list.shown, p)
		}
	})
	return builtin.list
}

// denied returns the index of the first phrase s contains, or -1.
func denied(s string, phrases []string, depth int) int {
	decoded := decodeEntities(s)
	forms := []string{s, stripMarkup(decoded, ""), stripMarkup(decoded, " ")}
	for k, form := range forms {
		if slices.Contains(forms[:k], form) {
			continue
		}
		norm := normalizePhrase(Fold(form))
		joined := joinSpelledOut(norm)
		sq := squeeze(norm)
		for i, p := range phrases {
			if strings.Contains(norm, p) || joined != norm && strings.Contains(joined, p) {
				return i
			}
			if sp := squeeze(p).s; len(sp) >= minSqueezed && sq.contains(sp) {
				return i
			}
		}
		if override.MatchString(norm) || override.MatchString(joined) {
			return overridePattern
		}
	}
	if depth == 0 {
		return -1
	}
	for _, text := range base64Texts(decoded) {
		if i := denied(text, phrases, depth-1); i >= 0 {
			return i
		}
	}
	return -1
}

// decodeEntities decodes HTML entities until none is left (three rounds
// at most: "&amp;#110;" is "&#110;" is "n").
func decodeEntities(s string) string {
	for range 3 {
		if !strings.Contains(s, "&") {
			break
		}
		next := html.UnescapeString(s)
		if next == s {
			break
		}
		s = next
	}
	return s
}

// markup matches HTML comments and tags.
var markup = regexp.MustCompile(`<!--.*?-->|</?[A-Za-z][^<>]*>`)

// stripMarkup replaces HTML comments and tags, terminal escape sequences
// and the Markdown characters that can split a word with sep.
func stripMarkup(s, sep string) string {
	if strings.IndexByte(s, '<') >= 0 {
		s = markup.ReplaceAllString(s, sep)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b || strings.HasPrefix(s[i:], "\u009b"):
			b.WriteString(sep)
			i += escapeSequenceLen(s[i:])
			continue
		case strings.IndexByte("*_~`\\", c) >= 0:
			b.WriteString(sep)
		default:
			b.WriteByte(c)
		}
		i++
	}
	return b.String()
}

// normalizePhrase lower-cases and reduces every run of spaces and
// punctuation (except the characters of special tokens) to one space,
// with a space at both ends so phrases match whole words.
func normalizePhrase(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(' ')
	space := true
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || isTokenRune(r) {
			b.WriteRune(r)
			space = false
			continue
		}
		if r == '\'' || r == '’' {
			continue
		}
		if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	if !space {
		b.WriteByte(' ')
	}
	return b.String()
}

// phraseForm is the form of a denylisted phrase matched against
// normalized text: whole words, except that a phrase beginning or ending
// with a special token's character ("<|im_start|>") also matches where
// the token touches a word ("<|im_start|>system"). It is "" for a phrase
// without letters, digits or token characters.
func phraseForm(p string) string {
	n := normalizePhrase(Fold(p))
	if strings.TrimSpace(n) == "" {
		return ""
	}
	if r, _ := utf8.DecodeRuneInString(n[1:]); isTokenRune(r) {
		n = n[1:]
	}
	if r, _ := utf8.DecodeLastRuneInString(n[:len(n)-1]); isTokenRune(r) {
		n = n[:len(n)-1]
	}
	return n
}

func isTokenRune(r rune) bool { return strings.ContainsRune(tokenRunes, r) }

// tokenRunes are the punctuation of special tokens ("<|im_start|>",
// "[INST]", "<<SYS>>", "### system"), kept when text is normalized.
const tokenRunes = "<>|[]/#"

// joinSpelledOut joins runs of three or more one-character words of a
// normalized text: " i g n o r e previous " reads " ignore previous ".
func joinSpelledOut(norm string) string {
	words := strings.Fields(norm)
	var b strings.Builder
	b.Grow(len(norm))
	b.WriteByte(' ')
	for i := 0; i < len(words); {
		j := i
		for j < len(words) && utf8.RuneCountInString(words[j]) == 1 {
			j++
		}
		if j-i >= 3 {
			b.WriteString(strings.Join(words[i:j], ""))
			b.WriteByte(' ')
			i = j
			continue
		}
		if j == i {
			j++
		}
		for _, w := range words[i:j] {
			b.WriteString(w)
			b.WriteByte(' ')
		}
		i = j
	}
	return b.String()
}

// base64Run matches what may be base64 (standard or URL alphabet).
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/_-]{16,}={0,2}`)

// base64Texts decodes the base64-looking runs of s that hold text.
func base64Texts(s string) []string {
	var out []string
	for _, run := range base64Run.FindAllString(s, maxBase64Runs) {
		if len(run) < minBase64Len {
			continue
		}
		raw := strings.TrimRight(run, "=")
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(raw); err == nil && isText(b) {
				out = append(out, string(b))
				break
			}
		}
	}
	return out
}

// isText reports whether b is UTF-8 made mostly of letters, digits,
// punctuation and spaces, as decoded instructions are and random bytes
// are not.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	n, good := 0, 0
	for _, r := range string(b) {
		n++
		if unicode.IsPrint(r) || r == '\n' || r == '\t' {
			good++
		}
	}
	return n > 0 && good*10 >= n*9
}
