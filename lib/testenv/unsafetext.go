package testenv

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// UnsafeText is one entry of the corpus of disguised and ordinary texts
// the text-safety checks are tested against.
type UnsafeText struct {
	Name string `json:"name"`
	Text string `json:"text"`
	// Flags name what the text hides ("denylist", "secret", "control"),
	// or are just "clean".
	Flags []string `json:"flags"`
}

// UnsafeTexts reads testdata/unsafe-text/corpus.jsonl at the module root:
// the checks themselves, the quality gate and prompt assembly all run it
// (docs/decisions/0010-text-safety.md).
func UnsafeTexts(t testing.TB) []UnsafeText {
	t.Helper()
	f, err := os.Open(filepath.Join(moduleRoot(t), "testdata", "unsafe-text", "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []UnsafeText
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e UnsafeText
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
