package english

// This test pins the toolkit to the four tokenisers it replaces, copied
// here as they were: the local embedder's, the clarity rubric's, the
// quality gate's and the lesson classifier's. It reads every text under
// the module's testdata directories (each file whole, each line, and
// every string of every JSON line) and the lesson taxonomy.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestToolkitSplitsAsTheTokenisersItReplaces(t *testing.T) {
	texts := corpus(t)
	if len(texts) < 1000 {
		t.Fatalf("only %d texts found", len(texts))
	}
	for _, s := range texts {
		// The embedder.
		buf, spans := oldTokenize(s, nil, nil)
		var want []Word
		for _, sp := range spans {
			want = append(want, Word{Text: string(buf[sp.start:sp.end]), Ident: sp.ident})
		}
		if got := Words(s, Code); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("Code splits %.80q as %v, the embedder as %v", s, got, want)
		}
		for _, c := range []struct {
			name string
			o    Options
			old  func(string) []string
		}{
			{"rubric", Options{Keep: "'’-_"}, oldRubricWords},
			{"quality gate", Options{Keep: "'"}, oldRulesWords},
			{"lesson", Options{ASCIILetters: true}, oldWordsOf},
		} {
			if got, want := Tokens(s, c.o), c.old(s); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("%+v splits %.80q as %q, the %s as %q", c.o, s, got, c.name, want)
			}
		}
	}
}

func corpus(t *testing.T) []string {
	t.Helper()
	var texts []string
	add := func(b []byte) {
		texts = append(texts, string(b))
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			texts = append(texts, line)
			var v any
			if json.Unmarshal([]byte(line), &v) == nil {
				texts = append(texts, stringsOf(v)...)
			}
		}
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.Contains(filepath.ToSlash(path), "/testdata/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		add(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "lesson", "taxonomy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	add(b)
	// Every rune, alone between words and inside them, and broken UTF-8.
	var all, inside strings.Builder
	for r := rune(0); r < 0x30000; r++ {
		all.WriteRune(r)
		inside.WriteString("aB")
		inside.WriteRune(r)
		inside.WriteString("cd'E’f-_g.H")
	}
	texts = append(texts, all.String(), inside.String(), "bad\xffbytes\xc3", "\u212Aelvin İstanbul ǅemal ΣΑΣ")
	t.Logf("%d texts", len(texts))
	return texts
}

func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, stringsOf(x)...)
		}
		return out
	case map[string]any:
		var out []string
		for k, x := range v {
			out = append(out, k)
			out = append(out, stringsOf(x)...)
		}
		return out
	}
	return nil
}

// evaluator/rubric.go
func oldRubricWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '’' && r != '-' && r != '_'
	})
}

// rules/quality.go
func oldRulesWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'')
	})
}

// lesson/classify.go
func oldWordsOf(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !('a' <= r && r <= 'z') })
}

// lib/embedding/tokenize.go
func oldTokenize(s string, buf []byte, spans []span) ([]byte, []span) {
	var (
		start     = -1
		ident     bool
		prevStart int
		prevLower bool
		upperRun  int
		joined    bool
	)
	endWord := func() {
		if start >= 0 && len(buf) > start {
			spans = append(spans, span{start, len(buf), ident})
		}
		start, ident = -1, false
	}
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
				start, upperRun, ident = len(buf), 0, joined
			case upper && prevLower:
				split(len(buf))
			case lower && upperRun >= 2 && !pluralS(r, s[i:]):
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
