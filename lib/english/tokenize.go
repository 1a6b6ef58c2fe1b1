package english

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Options say how text splits into words. Words are always lower-cased.
// The zero value splits at everything that is not a letter or a digit.
type Options struct {
	// Keep lists further runes that belong to a word wherever they occur:
	// "'" keeps "don't" whole, "-" keeps "hard-coded".
	Keep string
	// ASCIILetters reads only a to z (after lower-casing) as letters;
	// digits and every other letter separate words.
	ASCIILetters bool
	// Marks makes combining marks (Mn) part of words: "e\u0301" is one
	// word, not "e".
	Marks bool
	// ElideApostrophes drops an apostrophe (', ’, ‘ or ʼ) inside a word
	// when a letter follows: "don't" is "dont". Elsewhere an apostrophe
	// separates words.
	ElideApostrophes bool
	// Identifiers splits identifiers at camelCase boundaries
	// ("HTTPClient" is "http client", "URLs" stays whole) and marks their
	// parts Ident, as it marks words joined to the previous one by a dot
	// or underscore ("Close" in "resp.Body.Close", "user" in
	// "get_user").
	Identifiers bool
	// Ideographs makes each Han, Hiragana or Katakana character a word
	// of its own, since those scripts do not separate words with spaces.
	Ideographs bool
}

// Code reads text that mixes prose and code, as the local embedder and
// the lesson classifier do: combining marks kept, apostrophes elided,
// identifiers split, ideographs one word each.
var Code = Options{Marks: true, ElideApostrophes: true, Identifiers: true, Ideographs: true}

// Word is one word of a text: lower-cased, and marked Ident when it is
// a part of an identifier (Options.Identifiers).
type Word struct {
	Text  string
	Ident bool
}

// Words splits s into words.
func Words(s string, o Options) []Word {
	buf, spans := split(s, o)
	out := make([]Word, len(spans))
	for i, sp := range spans {
		out[i] = Word{Text: string(buf[sp.start:sp.end]), Ident: sp.ident}
	}
	return out
}

// Tokens splits s into words and returns their text.
func Tokens(s string, o Options) []string {
	buf, spans := split(s, o)
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = string(buf[sp.start:sp.end])
	}
	return out
}

type span struct {
	start, end int
	ident      bool
}

func split(s string, o Options) ([]byte, []span) {
	var spans []span
	buf := AppendWords(make([]byte, 0, len(s)), s, o, func(start, end int, ident bool) {
		spans = append(spans, span{start, end, ident})
	})
	return buf, spans
}

// AppendWords appends the lower-cased words of s to buf and returns the
// extended buffer, calling emit with each word's offsets in it as the
// word ends. It allocates nothing itself, for callers that split text
// on a hot path (the local embedder).
func AppendWords(buf []byte, s string, o Options, emit func(start, end int, ident bool)) []byte {
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
			emit(start, len(buf), ident)
		}
		start, ident = -1, false
	}
	// cut ends the current word at offset at and starts the next one
	// there, both parts of one identifier.
	cut := func(at int) {
		emit(start, at, true)
		start, ident = at, true
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		inWord := start >= 0
		switch {
		case r == utf8.RuneError:
			// Invalid UTF-8 separates words.
			endWord()
		case o.ElideApostrophes && isApostrophe(r):
			// Keep the word going only when a letter follows: "don't".
			if start >= 0 && i < len(s) {
				next, _ := utf8.DecodeRuneInString(s[i:])
				if unicode.IsLetter(next) {
					continue
				}
			}
			endWord()
		case o.Ideographs && isIdeograph(r):
			endWord()
			start = len(buf)
			buf = utf8.AppendRune(buf, r)
			endWord()
		case o.inWord(r):
			upper, lower := unicode.IsUpper(r), unicode.IsLower(r)
			switch {
			case start < 0:
				// "resp.Body.Close" and "max_retries": what follows a dot
				// or underscore inside a token is part of an identifier.
				start, upperRun, ident = len(buf), 0, joined
			case !o.Identifiers:
			case upper && prevLower:
				// "parseURL" -> "parse" | "URL"
				cut(len(buf))
			case lower && upperRun >= 2 && !pluralS(r, s[i:]):
				// "HTTPClient" -> "HTTP" | "Client": the last upper-case
				// rune starts the next word.
				cut(prevStart)
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
		joined = o.Identifiers && (r == '.' || r == '_') && inWord
	}
	endWord()
	return buf
}

// inWord reports whether r belongs to a word. Letters and digits are
// judged after lower-casing, as text lower-cased first would be; no rune
// changes class when lower-cased, but a few become ASCII (the Kelvin
// sign is "k").
func (o Options) inWord(r rune) bool {
	if o.Keep != "" && strings.ContainsRune(o.Keep, r) {
		return true
	}
	if o.ASCIILetters {
		l := unicode.ToLower(r)
		return 'a' <= l && l <= 'z'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || o.Marks && unicode.Is(unicode.Mn, r)
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
