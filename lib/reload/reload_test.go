package reload

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func parseInt(b []byte) (int, error) { return strconv.Atoi(strings.TrimSpace(string(b))) }

func TestAFileIsReadAgainWhenItChangesAndABrokenOneKeepsTheLastGoodValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write := func(s string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, at, at)
	}
	now := time.Now()
	if _, err := New("number file", path, 0, parseInt); err == nil || !strings.Contains(err.Error(), "number file") {
		t.Fatalf("a missing file at start: %v", err)
	}
	write("1", now)
	f, err := New("number file", path, 0, parseInt)
	if err != nil || f.Get() != 1 || f.Path() != path {
		t.Fatalf("start: %v %v", f, err)
	}
	write("2", now.Add(time.Second))
	if f.Get() != 2 || f.Err() != nil {
		t.Fatalf("after a change: %d, %v", f.Get(), f.Err())
	}
	write("two", now.Add(2*time.Second))
	if f.Get() != 2 || f.Err() == nil {
		t.Fatalf("a broken file: %d, %v", f.Get(), f.Err())
	}
	write("3", now.Add(3*time.Second))
	if f.Get() != 3 || f.Err() != nil {
		t.Fatalf("fixed again: %d, %v", f.Get(), f.Err())
	}
	os.Remove(path)
	if f.Get() != 3 {
		t.Fatal("a removed file dropped the value")
	}
	if _, err := New("number file", path, 0, func([]byte) (int, error) { return 0, errors.New("no") }); err == nil {
		t.Fatal("an unparsable file at start was accepted")
	}
	if fx := Fixed(7); fx.Get() != 7 || fx.Path() != "" || fx.Err() != nil {
		t.Fatal("Fixed")
	}
}

func TestStatusCountsEveryFailedReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	now := time.Now()
	write := func(s string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, at, at)
	}
	write("1", now)
	f, err := New("number file", path, 0, parseInt)
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Status(); st.Err != nil || st.Failures != 0 || st.Path != path || st.What != "number file" {
		t.Fatalf("start: %+v", st)
	}
	write("one", now.Add(time.Second))
	st := f.Status()
	if st.Err == nil || st.Failures != 1 || !strings.Contains(st.Err.Error(), path) {
		t.Fatalf("a broken file: %+v", st)
	}
	if again := f.Status(); again.Failures != 1 {
		t.Fatalf("an unchanged broken file counted again: %+v", again)
	}
	write("uno", now.Add(2*time.Second))
	if st := f.Status(); st.Failures != 2 || f.Get() != 1 {
		t.Fatalf("a second broken version: %+v, value %d", st, f.Get())
	}
	write("2", now.Add(3*time.Second))
	if st := f.Status(); st.Err != nil || st.Failures != 2 || f.Get() != 2 {
		t.Fatalf("fixed: %+v, value %d", st, f.Get())
	}
}
