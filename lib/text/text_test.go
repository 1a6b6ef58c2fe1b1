package text

import "testing"

func TestClippingCountsWhatItSays(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"Truncate keeps what fits", Truncate("short", 5), "short"},
		{"Truncate counts bytes, not the ellipsis", Truncate("abcdef", 3), "abc…"},
		{"Truncate cuts on a rune boundary", Truncate("aé", 2), "a…"},
		{"Truncate keeps spaces at the cut", Truncate("ab cd", 3), "ab …"},
		{"TruncateTrim drops spaces at the cut", TruncateTrim("ab cd", 3), "ab…"},
		{"TruncateTrim leaves text that fits alone", TruncateTrim(" ab ", 4), " ab "},
		{"Fit counts runes and the ellipsis", Fit("漢字漢字", 3), "漢字…"},
		{"Fit keeps what fits", Fit("漢字漢", 3), "漢字漢"},
		{"ClipRunes does not count the ellipsis", ClipRunes("漢字漢字", 3), "漢字漢…"},
		{"ClipWords cuts at a word", ClipWords("never log secrets in plain text", 20), "never log secrets…"},
		{"ClipWords drops punctuation at the cut", ClipWords("one, two, three", 9), "one, two…"},
		{"ClipWords cuts inside a long word", ClipWords("a verylongwordindeed", 10), "a verylong…"},
		{"OneLine collapses white space", OneLine(" a\n\tb  c "), "a b c"},
		{"Plural of one", Plural(1, "rule", "rules"), "rule"},
		{"Plural of zero", Plural(0, "rule", "rules"), "rules"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
