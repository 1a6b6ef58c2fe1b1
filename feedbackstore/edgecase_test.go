package feedbackstore

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEdgeCaseDocumentsAreWrittenAndDropped(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	doc := EdgeCase{
		DecisionID: "fb-0129", Agent: "coding-agent", ClusterID: "c-0a1b2c3d4e5f", ClusterSize: 2, DistinctReviewers: 1, DistinctEpics: 1,
		DecidedAt: time.Date(2026, 11, 20, 10, 0, 0, 0, time.FixedZone("CET", 3600)),
		Rationale: "Clear feedback, but only 1 similar decision from 1 reviewer: an edge case.",
		Comment:   "  The retry loop in client.go never gives up;\nadd a cap of 5 attempts.  ", Correction: "-for {\n+for i := 0; i < 5; i++ {",
	}
	bare := doc
	bare.DecisionID, bare.Comment, bare.Correction = "fb-0130", "   ", ""
	if err := f.store.WriteEdgeCases(ctx, []EdgeCase{doc, bare}); err != nil {
		t.Fatal(err)
	}
	// The documents are byte for byte what the evaluator's wiring wrote
	// before they moved here.
	for id, golden := range map[string]string{"fb-0129": "testdata/edge_case.md", "fb-0130": "testdata/edge_case_no_comment.md"} {
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got := gitCLI(t, f.repo.Path(), "show", "main:"+EdgeCasePath(id)); got != strings.TrimSpace(string(want)) {
			t.Errorf("%s =\n%s\nwant\n%s", id, got, want)
		}
	}
	if err := f.store.WriteEdgeCases(ctx, []EdgeCase{{DecisionID: "fb-0130", Remove: true}, {DecisionID: "never", Remove: true}}); err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, f.repo.Path(), "log", "--format=%s", "main"); got != "Document 0 edge cases, drop 1\nDocument 2 edge cases, drop 0" {
		t.Fatalf("log =\n%s", got)
	}
	if got := gitCLI(t, f.repo.Path(), "ls-tree", "-r", "--name-only", "main"); got != EdgeCasePath("fb-0129") {
		t.Fatalf("files = %s", got)
	}
	// Documents are not entries: the index follows decisions and records.
	if entries, _ := f.store.Entries(0, 10); len(entries) != 0 {
		t.Fatalf("entries = %+v", entries)
	}
}
