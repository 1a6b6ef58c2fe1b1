package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// Fold returns the form of s that denylist matching compares, so that
// "ig\u200bnore", "іgnore" (Cyrillic і) and "ｉｇｎｏｒｅ" all read "ignore":
//
//  1. lower case, then compatibility decomposition (NFKD): fullwidth and
//     mathematical letters, ligatures and circled letters become the
//     letters they stand for, accents come apart from their letters;
//  2. Unicode tag characters (U+E0020..U+E007E), which show nothing but
//     which a model reads, become the ASCII characters they encode;
//  3. what shows nothing is removed: format characters (zero-width
//     spaces and joiners, soft hyphens, bidirectional controls), other
//     default-ignorable characters, variation selectors, combining marks
//     (so accents are ignored) and control characters;
//  4. each run of non-ASCII characters is replaced by its skeleton in
//     Unicode's confusables table (UTS #39), which maps look-alike letters
//     of other scripts to the Latin letters they imitate. ASCII is never
//     mapped: the table also maps "m" to "rn" and "1" and "|" to "l",
//     which would make distinct English words and tokens equal
//     (docs/decisions/0010-text-safety.md);
//  5. lower case again, and composition (NFC).
//
// The result is for comparing only, never for showing. Fold(Fold(s)) is
// Fold(s).
func Fold(s string) string {
	// One round reaches the fixed point for all text seen so far (the
	// fuzz target checks); further rounds guard what was not seen. ASCII
	// is a fixed point of a round.
	for range 4 {
		next := foldOnce(s)
		if next == s || isASCII(next) {
			return next
		}
		s = next
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func foldOnce(s string) string {
	s = norm.NFKD.String(strings.ToLower(s))
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 0xe0020 && r <= 0xe007e:
			b.WriteByte(byte(r - 0xe0000))
		case invisible(r):
		default:
			b.WriteRune(r)
		}
	}
	s = skeletonNonASCII(b.String())
	return norm.NFC.String(strings.ToLower(s))
}

// invisible reports characters that show nothing (or only modify the
// character before them) and are dropped when folding.
func invisible(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Mn, unicode.Me, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// skeletonNonASCII replaces each run of non-ASCII characters of s by its
// confusables skeleton, without the marks the skeleton's decomposition
// brings back.
func skeletonNonASCII(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] < utf8.RuneSelf {
			j++
		}
		b.WriteString(s[i:j])
		i = j
		for j < len(s) && s[j] >= utf8.RuneSelf {
			j++
		}
		if j > i {
			for _, r := range confusables.Skeleton(s[i:j]) {
				if !invisible(r) {
					b.WriteRune(r)
				}
			}
		}
		i = j
	}
	return b.String()
}

// clean returns s as the secret checks read it: without the characters
// Fold removes (step 3) and with compatibility characters replaced
// (NFKC, rune by rune), but with its case and its letters kept, since
// credentials are case-sensitive ASCII. from[i] and to[i] are the byte
// span of s that byte i of the result comes from.
func clean(s string, spans bool) (out string, from, to []int) {
	var b strings.Builder
	b.Grow(len(s))
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r < utf8.RuneSelf && !invisible(r):
			piece = s[i : i+1]
		case r == utf8.RuneError && n == 1, invisible(r):
		case r >= 0xe0020 && r <= 0xe007e:
			buf[0] = byte(r - 0xe0000)
			piece = string(buf[:1])
		default:
			piece = norm.NFKC.String(s[i : i+n])
		}
		b.WriteString(piece)
		if spans {
			for range len(piece) {
				from = append(from, i)
				to = append(to, i+n)
			}
		}
		i += n
	}
	return b.String(), from, to
}
