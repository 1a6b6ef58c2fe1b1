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
	var at []int64
	for _, r := range recs {
		at = append(at, int64(buf.Len()))
		appendRecord(&buf, r)
	}
	at = append(at, int64(buf.Len()))
	path := filepath.Join(t.TempDir(), "j")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []record
	var gotAt []int64
	size, err := replay(path, 4, func(r record, off int64, n uint32) {
		got = append(got, r)
		gotAt = append(gotAt, off)
		if off+int64(n) > int64(buf.Len()) {
			t.Errorf("record at %d claims %d bytes, past the end", off, n)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(buf.Len()) {
		t.Errorf("valid size %d, want %d", size, buf.Len())
	}
	if len(got) != len(recs) {
		t.Fatalf("replayed %d records, want %d", len(got), len(recs))
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range recs {
		if gotAt[i] != at[i] {
			t.Errorf("record %d replayed at %d, written at %d", i, gotAt[i], at[i])
		}
		again, _, err := readRecord(f, at[i], uint32(at[i+1]-at[i]), 4, nil)
		if err != nil || again.id != recs[i].id || !slices.Equal(again.vector, recs[i].vector) {
			t.Errorf("record %d read back as %+v, %v", i, again, err)
		}
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
