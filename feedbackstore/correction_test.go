package feedbackstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

func correction(id, body string) Correction {
	return Correction{ID: id, By: "carol", At: t0, Body: json.RawMessage(body)}
}

func TestCorrectionsAreRecordedOnceInGitAndNumberedWithTheDecisions(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	if _, err := f.store.Store(ctx, []precept.Feedback{decision("v", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	c := correction("c-1", `{"kind":"merge","clusters":["a","b"],"why":"same problem"}`)
	for range 2 {
		if err := f.store.RecordCorrection(ctx, c, "Correct clusters: merge a, b"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.store.Store(ctx, []precept.Feedback{decision("w", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	// Another record under the same id is refused: records are never
	// rewritten.
	err := f.store.RecordCorrection(ctx, correction("c-1", `{"kind":"split"}`), "Correct clusters: split")
	if precept.ErrorCode(err) != precept.Conflict {
		t.Fatalf("rewrite = %v, want a conflict", err)
	}
	repo := f.repo.Path()
	gitCLI(t, repo, "fsck", "--strict", "--no-dangling")
	if got := gitCLI(t, repo, "log", "--format=%s", "main"); got != "Record decision w\nCorrect clusters: merge a, b\nRecord decision v" {
		t.Fatalf("log =\n%s", got)
	}
	trailers := gitCLI(t, repo, "log", "-1", "--skip=1", "--format=%(trailers)", "main")
	if !strings.Contains(trailers, "Correction-Id: c-1") || !strings.Contains(trailers, "Corrected-By: carol") {
		t.Fatalf("trailers = %q", trailers)
	}
	var onDisk Correction
	if err := json.Unmarshal([]byte(gitCLI(t, repo, "show", "main:"+CorrectionPath("c-1"))), &onDisk); err != nil || onDisk.By != "carol" || !onDisk.At.Equal(t0) {
		t.Fatalf("record in git = %+v, %v", onDisk, err)
	}
	entries, err := f.store.Entries(0, 10)
	if err != nil || len(entries) != 3 {
		t.Fatalf("entries = %d, %v", len(entries), err)
	}
	if entries[0].Decision == nil || entries[1].Correction == nil || entries[2].Decision == nil {
		t.Fatalf("entries out of order: %+v", entries)
	}
	var body map[string]any
	if err := json.Unmarshal(entries[1].Correction.Body, &body); err != nil || body["why"] != "same problem" {
		t.Fatalf("correction body = %s, %v", entries[1].Correction.Body, err)
	}
	list, err := f.store.Corrections(0, 10)
	if err != nil || len(list) != 1 || list[0].Seq != entries[1].Seq {
		t.Fatalf("corrections = %+v, %v", list, err)
	}
	if recs, _ := f.store.Since(0, 10); len(recs) != 2 {
		t.Fatalf("Since lists %d decisions", len(recs))
	}
}

func TestBadCorrectionsAreRefusedBeforeAnythingIsWritten(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	for name, c := range map[string]Correction{
		"no id":      {By: "carol", At: t0, Body: json.RawMessage(`{}`)},
		"path id":    {ID: "../x", By: "carol", At: t0, Body: json.RawMessage(`{}`)},
		"nobody":     {ID: "c", At: t0, Body: json.RawMessage(`{}`)},
		"no time":    {ID: "c", By: "carol", Body: json.RawMessage(`{}`)},
		"not object": {ID: "c", By: "carol", At: t0, Body: json.RawMessage(`[1]`)},
		"not json":   {ID: "c", By: "carol", At: t0, Body: json.RawMessage(`{`)},
		"too large":  {ID: "c", By: "carol", At: t0, Body: json.RawMessage(`{"why":"` + strings.Repeat("x", maxCorrectionBytes) + `"}`)},
	} {
		if err := f.store.RecordCorrection(ctx, c, "x"); precept.ErrorCode(err) != precept.Invalid {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if _, err := f.repo.Tip(Branch); !errors.Is(err, gitrepo.ErrNotFound) {
		t.Fatalf("a refused correction wrote the branch: %v", err)
	}
}

func TestTwoReplicasSeeTheSameCorrectionsInTheSameOrderAfterARebuild(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, "a")
	b := open(t, dir, "b")
	ctx := context.Background()
	var wg sync.WaitGroup
	for i, f := range []*fixture{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				id := fmt.Sprintf("c-%d-%d", i, j)
				if err := f.store.RecordCorrection(ctx, correction(id, `{"kind":"not_a_pattern"}`), "Correct "+id); err != nil {
					t.Error(err)
				}
				if _, err := f.store.Store(ctx, []precept.Feedback{decision(id, "coding-agent", t0.Add(time.Duration(j)*time.Minute))}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range []*fixture{a, b} {
		if _, err := f.store.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ea, _ := a.store.Entries(0, 100)
	eb, _ := b.store.Entries(0, 100)
	if len(ea) != 20 || !reflect.DeepEqual(ea, eb) {
		t.Fatalf("replica a has %d entries, b %d; equal: %v", len(ea), len(eb), reflect.DeepEqual(ea, eb))
	}
	a.close()
	if err := os.Remove(filepath.Join(dir, "nodes", "a", "feedback.db")); err != nil {
		t.Fatal(err)
	}
	a = open(t, dir, "a")
	rebuilt, _ := a.store.Entries(0, 100)
	if !reflect.DeepEqual(ea, rebuilt) {
		t.Fatal("a rebuilt index numbers the corrections differently")
	}
}

func TestAHandEditedCorrectionRecordIsNotANewCorrection(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	if err := f.store.RecordCorrection(ctx, correction("c-1", `{"kind":"merge"}`), "Correct c-1"); err != nil {
		t.Fatal(err)
	}
	edited, err := encodeCorrection(correction("c-1", `{"kind":"split"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.repo.Update(ctx, Branch, func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "edit by hand", Changes: []gitrepo.Change{
			{Path: CorrectionPath("c-1"), Data: edited},
			{Path: CorrectionPath("c-2"), Data: []byte("not json")},
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	list, _ := f.store.Corrections(0, 10)
	if len(list) != 1 || !strings.Contains(string(list[0].Correction.Body), "merge") {
		t.Fatalf("corrections after a hand edit = %+v", list)
	}
}
