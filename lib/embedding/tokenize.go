package embedding

import (
	"unicode"
	"unicode/utf8"
)

// span is one word of the input as byte offsets into the lower-cased
// buffer the tokenizer fills. ident marks the parts of an identifier
// ("TestDelete" is "test" and "delete", both ident).
type span struct {
	start, end int
	ident      bool
}

// tokenize splits s into lower-cased words, appending their bytes to buf
// and their positions to spans. A word is a run of letters, digits and
// combining marks. Everything else separates words, including bytes that
// are not valid UTF-8. Apostrophes inside a word are dropped ("don't" is
// "dont"), identifiers are split at camelCase boundaries ("HTTPClient" is
// "http client", "URLs" stays whole) and marked as such, as are words
// joined to the previous one by a dot or underscore ("Close" in
// "resp.Body.Close", "user" in "get_user"), and each Han, Hiragana or Katakana
// character is a word of its own, since those scripts do not separate words
// with spaces.
func tokenize(s string, buf []byte, spans []span) ([]byte, []span) {
	var (
		start     = -1 // buffer offset where the current word began, -1 outside a word
		ident     bool // the current word is part of an identifier
		prevStart int  // buffer offset of the previous rune of the word
		prevLower bool // the previous rune was lower case
		upperRun  int  // upper-case runes immediately before this one
		joined    bool // the previous rune is a '.' or '_' right after a word
	)
	endWord := func() {
		if start >= 0 && len(buf) > start {
			spans = append(spans, span{start, len(buf), ident})
		}
		start, ident = -1, false
	}
	// split ends the current word at offset at and starts the next one
	// there, both parts of one identifier.
	split := func(at int) {
		spans = append(spans, span{start, at, true})
		start, ident = at, true
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		inWord := start >= 0
		switch {
		case r == utf8.RuneError:
			endWord()
		case isApostrophe(r):
			// Keep the word going only when a letter follows: "don't".
			if start >= 0 && i < len(s) {
				next, _ := utf8.DecodeRuneInString(s[i:])
				if unicode.IsLetter(next) {
					continue
				}
			}
			endWord()
		case isIdeograph(r):
			endWord()
			start = len(buf)
			buf = utf8.AppendRune(buf, r)
			endWord()
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			upper, lower := unicode.IsUpper(r), unicode.IsLower(r)
			switch {
			case start < 0:
				// "resp.Body.Close" and "max_retries": what follows a dot
				// or underscore inside a token is part of an identifier.
				start, upperRun, ident = len(buf), 0, joined
			case upper && prevLower:
				// "parseURL" -> "parse" | "URL"
				split(len(buf))
			case lower && upperRun >= 2 && !pluralS(r, s[i:]):
				// "HTTPClient" -> "HTTP" | "Client": the last upper-case
				// rune starts the next word.
				split(prevStart)
			}
			prevStart = len(buf)
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			prevLower = lower
			if upper {
				upperRun++
			} else {
				upperRun = 0
			}
		default:
			endWord()
		}
		joined = (r == '.' || r == '_') && inWord
	}
	endWord()
	return buf, spans
}

// pluralS reports whether r is an "s" that ends its word, rest being the
// input after it: the "s" of "URLs" or "APIs".
func pluralS(r rune, rest string) bool {
	if r != 's' {
		return false
	}
	next, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !(unicode.IsLetter(next) || unicode.IsDigit(next))
}

func isApostrophe(r rune) bool {
	return r == '\'' || r == '\u2019' || r == '\u2018' || r == '\u02bc'
}

func isIdeograph(r rune) bool {
	// Nothing below U+2E80 (CJK Radicals) is Han, Hiragana or Katakana.
	return r >= 0x2e80 && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

// Word is one word of a text as the local embedder splits it: lower-cased,
// identifiers split into their parts (Ident).
type Word struct {
	Text  string
	Ident bool
}

// Words splits s into words the way the local embedder does (see
// tokenize), so other packages read text with the same eyes.
func Words(s string) []Word {
	if len(s) > MaxInputBytes {
		s = s[:MaxInputBytes]
	}
	buf, spans := tokenize(s, make([]byte, 0, len(s)), nil)
	out := make([]Word, len(spans))
	for i, sp := range spans {
		out[i] = Word{Text: string(buf[sp.start:sp.end]), Ident: sp.ident}
	}
	return out
}
