package mapbound

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// mappedResident is the resident size of this process's maps of path,
// from /proc/self/smaps.
func mappedResident(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	in := false
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			in = len(f) >= 6 && f[5] == path
		case in && len(f) == 3 && f[0] == "Rss:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			n += kb << 10
		}
	}
	return n
}

// filledDB is a bbolt file of about 32 MiB whose values are all read once,
// so its whole map is resident.
func filledDB(t *testing.T) (*bolt.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	val := bytes.Repeat([]byte{7}, 4000)
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := range 8000 {
			if err := b.Put(binary.BigEndian.AppendUint32(nil, uint32(i)), val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, db, 8000)
	return db, path
}

func readAll(t *testing.T, db *bolt.DB, want int) {
	t.Helper()
	n := 0
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("b")).ForEach(func(_, v []byte) error {
			if len(v) != 4000 || v[0] != 7 || v[3999] != 7 {
				t.Fatalf("value read back as %d bytes", len(v))
			}
			n++
			return nil
		})
	})
	if err != nil || n != want {
		t.Fatalf("read %d values, %v", n, err)
	}
}

func TestReleaseDropsATrackedMapAndItReadsTheSame(t *testing.T) {
	db, path := filledDB(t)
	before := mappedResident(t, path)
	if before < 24<<20 {
		t.Fatalf("the map is %d bytes resident after a full read; the test needs it resident", before)
	}
	untrack := Track(db)
	advised, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := mappedResident(t, path)
	if advised < 24<<20 || after > 1<<20 {
		t.Fatalf("advised %d bytes; resident %d before, %d after: want the map released", advised, before, after)
	}
	readAll(t, db, 8000)
	if again := mappedResident(t, path); again < 24<<20 {
		t.Fatalf("a full read after the release left %d bytes resident", again)
	}
	untrack()
	if advised, err := Release(); err != nil || advised != 0 || mappedResident(t, path) < 24<<20 {
		t.Fatalf("an untracked map was released: advised %d, %v", advised, err)
	}
}

func TestABoundReleasesOnlyAboveItsBudget(t *testing.T) {
	db, path := filledDB(t)
	defer Track(db)()
	resident := int64(100)
	b := &Bound{Budget: 200, Read: func() (int64, error) { return resident, nil }}
	if b.Check() || mappedResident(t, path) < 24<<20 {
		t.Fatal("released under the budget")
	}
	resident = 201
	if !b.Check() || mappedResident(t, path) > 1<<20 {
		t.Fatal("not released over the budget")
	}
	if st := b.Status(); st.Releases != 1 || st.FileResident != 201 || st.Budget != 200 {
		t.Fatalf("status = %+v", st)
	}
}

func TestFileResidentIsRssLessAnonymous(t *testing.T) {
	got, err := parseRollup([]byte("55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:              300 kB\nPss:    200 kB\nAnonymous:        100 kB\n"))
	if err != nil || got != 200<<10 {
		t.Fatalf("parse = %d, %v", got, err)
	}
	if _, err := parseRollup([]byte("Rss: 3 kB\n")); err == nil {
		t.Fatal("a rollup without Anonymous parsed")
	}
	if n, err := FileResident(); err != nil || n <= 0 {
		t.Fatalf("FileResident = %d, %v", n, err)
	}
}
