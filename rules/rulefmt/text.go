package rulefmt

// This file splits rule text into sentences and lines, for commit
// subjects and for the checks that read a rule sentence by sentence.

import (
	"regexp"
	"strings"
	"unicode"
)

// supportNote is the count a drafted rule ends with (" — flagged 3
// times by 3 reviewers in 3 epics."): precept's, not advice.
var supportNote = regexp.MustCompile(`\s+—\s+flagged \d+ times? by \d+ reviewers? in \d+ epics?\.?\s*$`)

// Advice is a rule text without the support count a drafted rule ends
// with, on one line: what the rule asks of the agent.
func Advice(content string) string {
	return strings.TrimSpace(supportNote.ReplaceAllString(strings.Join(strings.Fields(content), " "), ""))
}

// Sentences splits text at sentence ends, new lines and semicolons.
func Sentences(text string) []string {
	var out []string
	start := 0
	rs := []rune(text)
	for i, r := range rs {
		end := r == '\n' || r == ';'
		if (r == '.' || r == '!' || r == '?') && (i+1 == len(rs) || unicode.IsSpace(rs[i+1])) && !abbreviationBefore(rs, i) {
			end = true
		}
		if end {
			if s := strings.TrimSpace(string(rs[start:i])); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(string(rs[start:])); s != "" {
		out = append(out, s)
	}
	return out
}

// abbreviations end in a period without ending a sentence.
var abbreviations = map[string]bool{"e.g": true, "i.e": true, "etc": true, "vs": true, "approx": true, "incl": true, "cf": true}

// abbreviationBefore reports whether the period at rs[i] ends an
// abbreviation such as "e.g.".
func abbreviationBefore(rs []rune, i int) bool {
	if rs[i] != '.' {
		return false
	}
	j := i
	for j > 0 && !unicode.IsSpace(rs[j-1]) && rs[j-1] != '(' {
		j--
	}
	return abbreviations[strings.ToLower(string(rs[j:i]))]
}

// FirstSentence returns the first of text's sentences, or text when it has none.
func FirstSentence(text string) string {
	if s := Sentences(text); len(s) > 0 {
		return s[0]
	}
	return text
}

// FirstLine returns the first line of s, trimmed.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
