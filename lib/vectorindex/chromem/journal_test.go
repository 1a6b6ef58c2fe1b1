package chromem

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestJournalRecordsRoundTrip(t *testing.T) {
	recs := []record{
		{op: opUpsert, id: "a", document: "doc ✓", metadata: map[string]string{"agent": "coder", "ключ": "значение"}, vector: []float32{1, -0.5, 0, 3.25}},
		{op: opUpsert, id: "b", vector: []float32{0, 0, 0, 1}},
		{op: opDelete, id: "a"},
	}
	var buf bytes.Buffer
	buf.WriteString(journalMagic)
	for _, r := range recs {
		appendRecord(&buf, r)
	}
	path := filepath.Join(t.TempDir(), "j")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []record
	size, err := replay(path, 4, func(r record) { got = append(got, r) })
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(buf.Len()) {
		t.Errorf("valid size %d, want %d", size, buf.Len())
	}
	if len(got) != len(recs) {
		t.Fatalf("replayed %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		w, g := recs[i], got[i]
		if g.op != w.op || g.id != w.id || g.document != w.document || !maps.Equal(g.metadata, w.metadata) || !slices.Equal(g.vector, w.vector) {
			t.Errorf("record %d = %+v, want %+v", i, g, w)
		}
	}
}

// FuzzDecodeRecord feeds arbitrary payloads to the decoder: a damaged
// journal must be reported, never crash the process.
func FuzzDecodeRecord(f *testing.F) {
	var buf bytes.Buffer
	appendRecord(&buf, record{op: opUpsert, id: "a", document: "d", metadata: map[string]string{"k": "v"}, vector: []float32{1, 2}})
	f.Add(buf.Bytes()[8:])
	buf.Reset()
	appendRecord(&buf, record{op: opDelete, id: "a"})
	f.Add(buf.Bytes()[8:])
	f.Add([]byte{opUpsert, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := decodeRecord(p, 2)
		if err == nil && (r.id == "" || r.op == opUpsert && len(r.vector) != 2) {
			t.Fatalf("accepted an invalid record: %+v", r)
		}
	})
}
