package rules

import (
	"strings"
	"unicode"
)

// Whether rule text is English enough for the quality gate to judge it
// (docs/thresholds.md, "Quality gate"). Text in other languages is not
// judged.

// englishFunctionWords are frequent English words that other languages
// rarely spell the same way.
var englishFunctionWords = toSet(`the to of and is are be it this that these those there from with for by not do does
should must every each any when if than then into before after instead was were has have been its their your
which what they them you we our but or can will don't doesn't isn't aren't on too without never always`)

// englishOnlyWords are the function words of englishFunctionWords that no
// other common language writes as a word of its own ("to", "was", "do",
// "on" and "for" are words in Polish, German, Portuguese, French and
// Danish). One of them counts as two, so that a short English text such
// as "Log lines include the token." is judged too.
var englishOnlyWords = toSet(`the and with should every each which what when than then into instead been their
your they them these those there that from its have don't doesn't isn't aren't without never always`)

// otherLanguageWords are frequent function words of other languages
// written in Latin letters (German, French, Spanish, Portuguese,
// Italian, Dutch, Polish and the Scandinavian languages) that English
// text does not use as words of its own. Words English writes too ("die",
// "van", "den"), abbreviations ("mit", "est", "es", "op") and single
// letters are left out.
var otherLanguageWords = toSet(`und ist nicht der das ein eine einen zu von auf dem des sich auch wird werden sind bei
oder wenn immer nie keine kein les une du pour avec pas dans que qui sur aux cette sont toujours jamais ne el los
las para por una del al siempre nunca debe um uma não com em os da dos das sempre nunca deve il gli che della sono
sempre mai deve het een niet voor zijn altijd nooit moet się nie jest że dla zawsze nigdy och og att det är ett
för på inte ikke alltid aldrig skal ska`)

// looksEnglish reports whether text is English enough to judge. It is
// when it has at least two English function words (one that only English
// writes counts as two), making up at least a tenth of its words, and
// also when it has three words or more, all in ASCII letters, none of
// them a function word of another language: short English rules often
// hold no function word at all ("Document lacks a rollback plan",
// "Logs are noisy at info level"), while other languages show themselves
// by their function words or their letters ("für", "délai", Cyrillic or
// Japanese script).
func looksEnglish(text string) bool {
	ws := words(foldApostrophes(text))
	found := map[string]bool{}
	score, n := 0, 0
	foreign := false
	for _, w := range ws {
		if otherLanguageWords[w] || strings.IndexFunc(w, func(r rune) bool { return r > unicode.MaxASCII }) >= 0 {
			foreign = true
		}
		if !englishFunctionWords[w] {
			continue
		}
		n++
		if !found[w] {
			found[w] = true
			score++
			if englishOnlyWords[w] {
				score++
			}
		}
	}
	return score >= 2 && n*10 >= len(ws) || !foreign && len(ws) >= 3
}

// foldApostrophes writes typographic apostrophes as ASCII ones, so
// "don’t" is one word, as "don't" is.
func foldApostrophes(s string) string {
	return strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u02bc", "'").Replace(s)
}
