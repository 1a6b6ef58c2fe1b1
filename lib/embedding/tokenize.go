package embedding

import "github.com/precept-dev/precept/lib/english"

// span is one word of the input as byte offsets into the lower-cased
// buffer the tokenizer fills. ident marks the parts of an identifier
// ("TestDelete" is "test" and "delete", both ident).
type span struct {
	start, end int
	ident      bool
}

// tokenize splits s into lower-cased words as english.Code reads them
// (identifiers split and marked, apostrophes elided, ideographs one word
// each), appending their bytes to buf and their positions to spans.
func tokenize(s string, buf []byte, spans []span) ([]byte, []span) {
	buf = english.AppendWords(buf, s, english.Code, func(start, end int, ident bool) {
		spans = append(spans, span{start, end, ident})
	})
	return buf, spans
}
