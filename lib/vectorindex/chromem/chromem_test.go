package chromem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/indextest"
)

func TestIndexMeetsTheContract(t *testing.T) {
	base := t.TempDir()
	indextest.Run(t, func(t *testing.T, key string, spec vectorindex.Spec) (vectorindex.Index, bool) {
		idx, reset, err := Open(filepath.Join(base, key), spec)
		if err != nil {
			t.Fatalf("open %s: %v", key, err)
		}
		return idx, reset
	})
}

var testSpec = vectorindex.Spec{Embedder: "chromem-test", Dimension: 8}

func openT(t *testing.T, dir string, spec vectorindex.Spec) (*Index, bool) {
	t.Helper()
	idx, reset, err := Open(dir, spec)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { idx.Close() })
	return idx, reset
}

func unit(i int) []float32 {
	v := make([]float32, testSpec.Dimension)
	v[i%testSpec.Dimension] = 1
	v[(i+1)%testSpec.Dimension] = float32(i%5) / 10
	return v
}

func vectors(prefix string, n int) []vectorindex.Vector {
	vs := make([]vectorindex.Vector, n)
	for i := range vs {
		vs[i] = vectorindex.Vector{ID: fmt.Sprintf("%s-%d", prefix, i), Embedding: unit(i), Metadata: map[string]string{"i": fmt.Sprint(i)}, Document: fmt.Sprint("doc ", i)}
	}
	return vs
}

func mustUpsert(t *testing.T, idx *Index, vs []vectorindex.Vector) {
	t.Helper()
	if err := idx.Upsert(context.Background(), vs); err != nil {
		t.Fatalf("upsert: %v", err)
	}
}

func count(t *testing.T, idx *Index) int {
	t.Helper()
	n, err := idx.Count(context.Background())
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func mustClose(t *testing.T, idx *Index) {
	t.Helper()
	if err := idx.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestReopenSurvivesDamageOrResets(t *testing.T) {
	tests := []struct {
		name      string
		damage    func(t *testing.T, dir string)
		wantReset bool
		wantCount int
	}{
		{
			name:      "undamaged",
			damage:    func(*testing.T, string) {},
			wantCount: 5,
		},
		{
			// A crash during an append leaves half a record; that
			// upsert never returned, so dropping it loses nothing
			// acknowledged.
			name: "torn final record is dropped",
			damage: func(t *testing.T, dir string) {
				var buf bytes.Buffer
				appendRecord(&buf, record{op: opUpsert, id: "torn", vector: unit(1)})
				appendFile(t, filepath.Join(dir, journalFile), buf.Bytes()[:buf.Len()-3])
			},
			wantCount: 5,
		},
		{
			name: "torn header is dropped",
			damage: func(t *testing.T, dir string) {
				appendFile(t, filepath.Join(dir, journalFile), []byte{9, 0})
			},
			wantCount: 5,
		},
		{
			name: "damaged record before the end resets",
			damage: func(t *testing.T, dir string) {
				flipByte(t, filepath.Join(dir, journalFile), int64(len(journalMagic))+12)
			},
			wantReset: true,
		},
		{
			name: "bad journal header resets",
			damage: func(t *testing.T, dir string) {
				flipByte(t, filepath.Join(dir, journalFile), 0)
			},
			wantReset: true,
		},
		{
			name: "missing journal resets",
			damage: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, journalFile)); err != nil {
					t.Fatal(err)
				}
			},
			wantReset: true,
		},
		{
			name: "unreadable spec resets",
			damage: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, specFile), []byte("{not json"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantReset: true,
		},
		{
			name: "missing spec resets",
			damage: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, specFile)); err != nil {
					t.Fatal(err)
				}
			},
			wantReset: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			idx, _ := openT(t, dir, testSpec)
			mustUpsert(t, idx, vectors("v", 5))
			mustClose(t, idx)
			tt.damage(t, dir)

			idx, reset := openT(t, dir, testSpec)
			if reset != tt.wantReset {
				t.Fatalf("reset = %v, want %v", reset, tt.wantReset)
			}
			if n := count(t, idx); n != tt.wantCount {
				t.Fatalf("count = %d, want %d", n, tt.wantCount)
			}
			// The index takes writes again and keeps them.
			mustUpsert(t, idx, vectors("after", 2))
			mustClose(t, idx)
			idx, reset = openT(t, dir, testSpec)
			if reset {
				t.Fatal("reopen after repair: reset = true")
			}
			if n := count(t, idx); n != tt.wantCount+2 {
				t.Fatalf("count after repair and reopen = %d, want %d", n, tt.wantCount+2)
			}
		})
	}
}

func TestIDsWhoseChromemFileNamesCollideBothSurviveReopen(t *testing.T) {
	// chromem-go v0.7.0 names a persisted document by the first 32 bits of
	// its ID's SHA-256; these two IDs share them (235d2031), so its own
	// persistence would keep only one.
	dir := t.TempDir()
	idx, _ := openT(t, dir, testSpec)
	mustUpsert(t, idx, []vectorindex.Vector{
		{ID: "feedback-11106", Embedding: unit(0)},
		{ID: "feedback-138833", Embedding: unit(1)},
	})
	mustClose(t, idx)
	idx, _ = openT(t, dir, testSpec)
	if n := count(t, idx); n != 2 {
		t.Fatalf("count after reopen = %d, want 2", n)
	}
}

func TestSecondOpenOfADirectoryIsLocked(t *testing.T) {
	dir := t.TempDir()
	idx, _ := openT(t, dir, testSpec)
	if _, _, err := Open(dir, testSpec); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
	mustClose(t, idx)
	idx, reset := openT(t, dir, testSpec)
	if reset {
		t.Fatal("open after close: reset = true, want false")
	}
	mustClose(t, idx)
}

func TestJournalIsCompactedWhenMostlyDeadRecords(t *testing.T) {
	dir := t.TempDir()
	idx, _ := openT(t, dir, testSpec)
	vs := vectors("c", 10)
	for range 150 {
		mustUpsert(t, idx, vs)
	}
	if err := idx.Delete(context.Background(), []string{"c-0", "c-1"}); err != nil {
		t.Fatal(err)
	}
	// 1,502 records for 8 live vectors: compaction must have run.
	info, err := os.Stat(filepath.Join(dir, journalFile))
	if err != nil {
		t.Fatal(err)
	}
	var one bytes.Buffer
	appendRecord(&one, record{op: opUpsert, id: vs[9].ID, document: vs[9].Document, metadata: vs[9].Metadata, vector: vs[9].Embedding})
	if limit := int64(len(journalMagic) + compactMinDead*one.Len()); info.Size() > limit {
		t.Fatalf("journal is %d bytes after 1,502 writes to 10 IDs, want ≤ %d", info.Size(), limit)
	}
	want, err := idx.Query(context.Background(), vectorindex.Query{Embedding: unit(3), Limit: 10, MinSimilarity: -1})
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, idx)
	idx, reset := openT(t, dir, testSpec)
	if reset {
		t.Fatal("reopen after compaction: reset = true")
	}
	got, err := idx.Query(context.Background(), vectorindex.Query{Embedding: unit(3), Limit: 10, MinSimilarity: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 || len(got) != len(want) {
		t.Fatalf("after compaction and reopen: %d hits, want 8", len(got))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Similarity != want[i].Similarity || !maps.Equal(got[i].Metadata, want[i].Metadata) || got[i].Document != want[i].Document {
			t.Fatalf("hit %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestOpenRejectsAnInvalidSpec(t *testing.T) {
	for _, spec := range []vectorindex.Spec{{Dimension: 8}, {Embedder: "e"}, {Embedder: "e", Dimension: -1}} {
		if _, _, err := Open(t.TempDir(), spec); !errors.Is(err, vectorindex.ErrInvalid) {
			t.Errorf("Open(%v): err = %v, want ErrInvalid", spec, err)
		}
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The journal is read back while the index runs: a record that changed
// on disk under it is reported by whatever reads it, never served.
func TestARecordChangedOnDiskIsReportedNotServed(t *testing.T) {
	dir := t.TempDir()
	idx, _ := openT(t, dir, testSpec)
	vs := vectors("v", 5)
	mustUpsert(t, idx, vs)
	ctx := context.Background()
	if _, err := idx.Embeddings(ctx, []string{"v-3"}); err != nil {
		t.Fatal(err)
	}
	idx.mu.RLock()
	at, size := idx.rows.at[idx.rows.pos["v-3"]], idx.rows.size[idx.rows.pos["v-3"]]
	idx.mu.RUnlock()
	flipByte(t, filepath.Join(dir, journalFile), at+int64(size)-2) // inside the vector
	if _, err := idx.Embeddings(ctx, []string{"v-3"}); !errors.Is(err, errCorrupt) {
		t.Errorf("Embeddings of a changed record: %v, want errCorrupt", err)
	}
	if _, err := idx.Query(ctx, vectorindex.Query{Embedding: vs[3].Embedding, Limit: 1}); !errors.Is(err, errCorrupt) {
		t.Errorf("Query re-scoring a changed record: %v, want errCorrupt", err)
	}
	// The others are still served.
	got, err := idx.Query(ctx, vectorindex.Query{Embedding: vs[1].Embedding, Limit: 1})
	if err != nil || len(got) != 1 || got[0].ID != "v-1" {
		t.Errorf("query of an intact record: %v, %v", got, err)
	}
}

// A vector the contract accepts but so short that its inverse length
// overflows float32 must be compared like any other, and must not hide
// the other rows.
func TestAVeryShortVectorIsComparedNotPoisonous(t *testing.T) {
	spec := vectorindex.Spec{Embedder: "test", Dimension: 4}
	idx, _ := openT(t, t.TempDir(), spec)
	tiny := []float32{1e-40, 0, 0, 0}
	if err := (vectorindex.Vector{ID: "tiny", Embedding: tiny}).Validate(spec); err != nil {
		t.Fatalf("the contract rejects it: %v", err)
	}
	stored := map[string][]float32{"tiny": tiny, "x": {1, 0, 0, 0}, "y": {0, 1, 0, 0}}
	for id, v := range stored {
		mustUpsert(t, idx, []vectorindex.Vector{{ID: id, Embedding: v}})
	}
	q := []float32{1, 0.1, 0, 0}
	for _, limit := range []int{1, 2, 3} {
		want := expected(stored, q, limit, -1, nil)
		got, err := idx.Query(context.Background(), vectorindex.Query{Embedding: q, Limit: limit, MinSimilarity: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(got) != limit {
			t.Fatalf("limit %d: %d hits, want %d", limit, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Similarity != want[i].Similarity {
				t.Errorf("limit %d hit %d: %s %v, want %s %v", limit, i, got[i].ID, got[i].Similarity, want[i].ID, want[i].Similarity)
			}
		}
	}
}

// A journal record with a valid checksum but a NaN in its vector is
// corruption: the index resets rather than serve it.
func TestANonFiniteVectorInTheJournalResets(t *testing.T) {
	dir := t.TempDir()
	idx, _ := openT(t, dir, testSpec)
	mustUpsert(t, idx, vectors("v", 5))
	mustClose(t, idx)
	bad := make([]float32, testSpec.Dimension)
	bad[0] = float32(math.NaN())
	var buf bytes.Buffer
	appendRecord(&buf, record{op: opUpsert, id: "v-0", vector: bad})
	appendRecord(&buf, record{op: opUpsert, id: "v-9", vector: unit(3)})
	appendFile(t, filepath.Join(dir, journalFile), buf.Bytes())
	idx, reset := openT(t, dir, testSpec)
	if !reset || count(t, idx) != 0 {
		t.Errorf("reset %v with %d vectors, want a reset to empty", reset, count(t, idx))
	}
}

// A limit beyond any size must not allocate by it, filtered or not.
func TestAHugeLimitIsCutToTheStoredCount(t *testing.T) {
	idx, _ := openT(t, t.TempDir(), testSpec)
	mustUpsert(t, idx, vectors("v", 3))
	for _, limit := range []int{math.MaxInt, 1 << 40} {
		for want, where := range map[int]map[string]string{3: nil, 1: {"i": "1"}} {
			got, err := idx.Query(context.Background(), vectorindex.Query{Embedding: unit(1), Limit: limit, MinSimilarity: -1, Where: where})
			if err != nil || len(got) != want {
				t.Errorf("limit %d where %v: %d hits, %v; want %d", limit, where, len(got), err, want)
			}
		}
	}
}

// Zeros past the last record, which a crash after the file grew can
// leave, are a torn tail, not corruption: the records before them stay.
func TestAZeroTailIsDroppedNotAReset(t *testing.T) {
	dir := t.TempDir()
	idx, _ := openT(t, dir, testSpec)
	mustUpsert(t, idx, vectors("v", 5))
	mustClose(t, idx)
	appendFile(t, filepath.Join(dir, journalFile), make([]byte, 4096))
	idx, reset := openT(t, dir, testSpec)
	if reset || count(t, idx) != 5 {
		t.Errorf("reset %v with %d vectors, want the 5 kept", reset, count(t, idx))
	}
}

// A record replay would refuse is refused at upsert, before anything is
// stored.
func TestAnOversizedRecordIsRefusedAtUpsert(t *testing.T) {
	idx, _ := openT(t, t.TempDir(), testSpec)
	big := vectorindex.Vector{ID: "big", Embedding: unit(1), Document: strings.Repeat("x", maxRecordSize)}
	err := idx.Upsert(context.Background(), []vectorindex.Vector{{ID: "ok", Embedding: unit(2)}, big})
	if !errors.Is(err, vectorindex.ErrInvalid) || count(t, idx) != 0 {
		t.Errorf("upsert of an oversized record: %v, %d stored", err, count(t, idx))
	}
}
