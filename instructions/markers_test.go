package instructions

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var block = Block{Agent: "code-writer", Stage: "review", Version: "v1:abc123", Text: "Rule one.\n\n- Rule two.\n"}

func TestApplyKeepsEveryByteOutsideTheMarkers(t *testing.T) {
	first, _, err := Apply(AgentsMD, "AGENTS.md", nil, false, block, false)
	if err != nil {
		t.Fatal(err)
	}
	firstBlock := strings.TrimSuffix(string(first), "\n")
	crlfBlock := render(block, "\r\n")
	next := block
	next.Version, next.Text = "v1:def456", "Rule three.\n"
	nextLF, nextCRLF := render(next, "\n"), render(next, "\r\n")

	cases := []struct {
		name, old, want string
		outcome         Outcome
	}{
		{"empty file", "", nextLF + "\n", Appended},
		{"no final newline", "# Team\nhand text", "# Team\nhand text\n\n" + nextLF + "\n", Appended},
		{"final newline", "# Team\n", "# Team\n\n" + nextLF + "\n", Appended},
		{"CRLF file gets a CRLF block", "# Team\r\nhand\r\n", "# Team\r\nhand\r\n\r\n" + nextCRLF + "\r\n", Appended},
		{"replace keeps text before and after", "before\n" + firstBlock + "\nafter  \n\ttabs", "before\n" + nextLF + "\nafter  \n\ttabs", Replaced},
		{"replace with no newline after the end marker", "x\n" + firstBlock, "x\n" + nextLF, Replaced},
		{"replace in a CRLF file", "a\r\n" + crlfBlock + "\r\nz\r\n", "a\r\n" + nextCRLF + "\r\nz\r\n", Replaced},
		{"another agent's block is left alone",
			"a\n" + strings.Replace(firstBlock, "agent=code-writer", "agent=other", 1) + "\n" + firstBlock + "\n",
			"a\n" + strings.Replace(firstBlock, "agent=code-writer", "agent=other", 1) + "\n" + nextLF + "\n", Replaced},
		{"a marker quoted mid-line is not a marker", "see `<!-- precept:end -->` here\n", "see `<!-- precept:end -->` here\n\n" + nextLF + "\n", Appended},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, outcome, err := Apply(AgentsMD, "AGENTS.md", []byte(c.old), true, next, false)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want || outcome != c.outcome {
				t.Fatalf("got %s\n%q\nwant %s\n%q", outcome, got, c.outcome, c.want)
			}
			again, outcome, err := Apply(AgentsMD, "AGENTS.md", got, true, next, false)
			if err != nil || string(again) != string(got) || outcome != Unchanged {
				t.Fatalf("second apply: %s %v\n%q", outcome, err, again)
			}
			if v, err := Recorded(got, next.Agent); err != nil || v != next.Version {
				t.Fatalf("recorded version %q, %v", v, err)
			}
		})
	}
}

func TestApplyCreatesEachFormat(t *testing.T) {
	for _, f := range AllFormats() {
		got, outcome, err := Apply(f, f.Path(block.Agent), nil, false, block, false)
		if err != nil || outcome != Created {
			t.Fatalf("%s: %s %v", f, outcome, err)
		}
		s := string(got)
		if !strings.Contains(s, "<!-- precept:begin agent=code-writer stage=review version=v1:abc123 sha256=") ||
			!strings.Contains(s, "Rule one.\n\n- Rule two.\n<!-- precept:end -->\n") {
			t.Fatalf("%s: %q", f, s)
		}
		if f == Cursor != strings.HasPrefix(s, "---\ndescription: ") {
			t.Fatalf("%s: front matter: %q", f, s)
		}
	}
	scoped := block
	scoped.Path = "services/api/"
	got, _, _ := Apply(Cursor, "x.mdc", nil, false, scoped, false)
	if !strings.Contains(string(got), "globs: services/api/**\nalwaysApply: false\n---\n") {
		t.Fatalf("scoped cursor rule: %q", got)
	}
	got, _, _ = Apply(Cursor, "x.mdc", nil, false, block, false)
	if !strings.Contains(string(got), "globs: \nalwaysApply: true\n---\n") {
		t.Fatalf("unscoped cursor rule: %q", got)
	}
}

func TestApplyRefusesHandEditsUnlessTold(t *testing.T) {
	created, _, _ := Apply(AgentsMD, "AGENTS.md", nil, false, block, false)
	edited := strings.Replace(string(created), "Rule two.", "Rule two, edited by hand.", 1)
	next := block
	next.Text = "Rule three.\n"

	_, _, err := Apply(AgentsMD, "AGENTS.md", []byte(edited), true, next, false)
	var he *HandEditError
	if !errors.As(err, &he) || !errors.Is(err, ErrHandEdited) || he.Path != "AGENTS.md" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "edited by hand") || !strings.Contains(err.Error(), "overwrite") {
		t.Fatalf("message does not say what to do: %v", err)
	}
	got, outcome, err := Apply(AgentsMD, "AGENTS.md", []byte(edited), true, next, true)
	if err != nil || outcome != Replaced || string(got) != render(next, "\n")+"\n" {
		t.Fatalf("overwrite: %s %v %q", outcome, err, got)
	}
	// Even the same text is refused: the edit would be lost silently.
	if _, _, err := Apply(AgentsMD, "AGENTS.md", []byte(edited), true, block, false); !errors.Is(err, ErrHandEdited) {
		t.Fatalf("same text over a hand edit: %v", err)
	}
}

func TestApplyRejectsMalformedMarkers(t *testing.T) {
	good := render(block, "\n")
	begin, _, _ := strings.Cut(good, "\n")
	cases := map[string]string{
		"begin without end":      "a\n" + begin + "\ntext\n",
		"end without begin":      "a\n<!-- precept:end -->\n",
		"nested begin":           begin + "\n" + good + "\n",
		"two blocks, one agent":  good + "\n" + good + "\n",
		"begin without sha256":   "<!-- precept:begin agent=code-writer stage=review version=v1:x -->\nx\n<!-- precept:end -->\n",
		"begin not closed":       "<!-- precept:begin agent=code-writer stage=review version=v sha256=" + strings.Repeat("a", 64) + "\nx\n<!-- precept:end -->\n",
		"unknown precept marker": "<!-- precept:middle -->\n",
		"attribute twice":        strings.Replace(begin, "stage=review", "stage=review stage=x", 1) + "\nx\n<!-- precept:end -->\n",
	}
	for name, old := range cases {
		t.Run(name, func(t *testing.T) {
			got, _, err := Apply(AgentsMD, "AGENTS.md", []byte(old), true, block, true)
			if !errors.Is(err, ErrMalformed) || got != nil {
				t.Fatalf("err = %v, got %q", err, got)
			}
			if !strings.HasPrefix(err.Error(), "AGENTS.md: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

func TestBlockValidation(t *testing.T) {
	cases := map[string]func(*Block){
		"agent with a space":      func(b *Block) { b.Agent = "a b" },
		"agent with ..":           func(b *Block) { b.Agent = "a..b" },
		"agent ending in .lock":   func(b *Block) { b.Agent = "a.lock" },
		"empty stage":             func(b *Block) { b.Stage = "" },
		"version with a space":    func(b *Block) { b.Version = "v1 x" },
		"version closing comment": func(b *Block) { b.Version = "-->" },
		"text holding a marker":   func(b *Block) { b.Text = "x\n<!-- precept:end -->\n" },
	}
	for name, edit := range cases {
		b := block
		edit(&b)
		if _, _, err := Apply(AgentsMD, "AGENTS.md", nil, false, b, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestParseFormats(t *testing.T) {
	if f, err := ParseFormats(""); err != nil || len(f) != 4 {
		t.Fatalf("default: %v %v", f, err)
	}
	if f, err := ParseFormats("Cursor, agents,cursor"); err != nil || len(f) != 2 || f[0] != Cursor || f[1] != AgentsMD {
		t.Fatalf("list: %v %v", f, err)
	}
	if _, err := ParseFormats("agents,windsurf"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown: %v", err)
	}
}

// A large file is read in one pass: a file at the cap with a line per
// two bytes answers at once, and a larger one is refused by name.
func TestLargeFilesAreReadInOnePassAndCapped(t *testing.T) {
	b := Block{Agent: "a", Stage: "s", Version: "v1", Text: "x"}
	lines := MaxFileSize/2 - 64
	big := append(bytes.Repeat([]byte("x\n"), lines), "<!-- precept:begin oops -->\n"...)
	if _, _, err := Apply(AgentsMD, "AGENTS.md", big, true, b, false); !errors.Is(err, ErrMalformed) ||
		!strings.Contains(err.Error(), fmt.Sprintf("line %d:", lines+1)) {
		t.Fatalf("a file at the cap: %v", err)
	}
	huge := bytes.Repeat([]byte("hand text\n"), 500_000) // 5 MB
	if _, _, err := Apply(AgentsMD, "AGENTS.md", huge, true, b, false); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "AGENTS.md") {
		t.Fatalf("a 5 MB file: %v", err)
	}
	if _, err := Recorded(huge, "a"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Recorded of a 5 MB file: %v", err)
	}
}

func BenchmarkApplyAtTheCap(b *testing.B) {
	old := bytes.Repeat([]byte("hand text\n"), MaxFileSize/10-100)
	blk := Block{Agent: "a", Stage: "s", Version: "v1", Text: "x"}
	for b.Loop() {
		if _, _, err := Apply(AgentsMD, "AGENTS.md", old, true, blk, false); err != nil {
			b.Fatal(err)
		}
	}
}

// An editor converting the file's line endings is not a hand edit.
func TestLineEndingConversionIsNotAHandEdit(t *testing.T) {
	lf, _, err := Apply(AgentsMD, "AGENTS.md", []byte("# T\n"), true, block, false)
	if err != nil {
		t.Fatal(err)
	}
	crlf := strings.ReplaceAll(string(lf), "\n", "\r\n")
	got, outcome, err := Apply(AgentsMD, "AGENTS.md", []byte(crlf), true, block, false)
	if err != nil || outcome != Unchanged || string(got) != crlf {
		t.Fatalf("LF to CRLF: %s %v", outcome, err)
	}
	back := strings.ReplaceAll(crlf, "\r\n", "\n")
	if _, outcome, err := Apply(AgentsMD, "AGENTS.md", []byte(back), true, block, false); err != nil || outcome != Unchanged {
		t.Fatalf("CRLF back to LF: %s %v", outcome, err)
	}
	next := block
	next.Version, next.Text = "v1:def456", "Rule three.\n"
	if _, outcome, err := Apply(AgentsMD, "AGENTS.md", []byte(crlf), true, next, false); err != nil || outcome != Replaced {
		t.Fatalf("a new version over the converted file: %s %v", outcome, err)
	}
}
