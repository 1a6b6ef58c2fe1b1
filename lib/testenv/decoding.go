package testenv

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// DecodingCase is one case of the strict-decoding table that every JSON
// path of a decision event is tested against.
type DecodingCase struct {
	Name string
	// Event is the decision event as a JSON object, exactly as sent.
	Event []byte
	// Error is a part of the rejection every path must give; empty when
	// every path must accept the event.
	Error string
}

// DecodingCases reads testdata/strict-decoding.json at the module root:
// the stream, the CLI's event files and the Connect JSON API read the same
// events and must agree on them (docs/formats.md).
func DecodingCases(t testing.TB) []DecodingCase {
	t.Helper()
	path := filepath.Join(moduleRoot(t), "testdata", "strict-decoding.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Base  map[string]json.RawMessage `json:"base"`
		Cases []struct {
			Name    string   `json:"name"`
			Without []string `json:"without"`
			Members string   `json:"members"`
			Error   string   `json:"error"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := make([]DecodingCase, 0, len(table.Cases))
	for _, c := range table.Cases {
		base := make(map[string]json.RawMessage, len(table.Base))
		for k, v := range table.Base {
			base[k] = v
		}
		for _, k := range c.Without {
			delete(base, k)
		}
		// Marshal sorts the keys; the case's members go after them, raw, so
		// they may repeat a key or vary its case.
		event, err := json.Marshal(base)
		if err != nil {
			t.Fatal(err)
		}
		if c.Members != "" {
			event = append(bytes.TrimSuffix(event, []byte("}")), []byte(","+c.Members+"}")...)
		}
		out = append(out, DecodingCase{Name: c.Name, Event: event, Error: c.Error})
	}
	return out
}

// moduleRoot is the nearest directory above the working directory that
// holds go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
