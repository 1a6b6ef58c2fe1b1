package api

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lesson"
)

func TestListCategoriesServesTheLiveTaxonomyWithACuratorsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "taxonomy.yaml")
	write := func(s string, at time.Time) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, at, at)
	}
	const flags = "categories:\n  - id: feature-flags\n    group: configuration\n    name: Feature flags\n    description: New behaviour is not behind a feature flag.\n    rule: Put new behaviour behind a feature flag.\n    cues: [feature flag]\n"
	write(flags, time.Now())
	src, err := lesson.NewSource(path)
	if err != nil {
		t.Fatal(err)
	}
	list := func(s *EvaluatorService) map[string]*preceptv1.TaxonomyCategory {
		t.Helper()
		resp, err := s.ListCategories(context.Background(), connect.NewRequest(&preceptv1.ListCategoriesRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*preceptv1.TaxonomyCategory{}
		for _, c := range resp.Msg.GetCategories() {
			out[c.GetId()] = c
		}
		return out
	}
	embedded := len(lesson.DefaultTaxonomy().Categories)
	got := list(&EvaluatorService{Lessons: src})
	if c := got["feature-flags"]; c == nil || c.GetName() != "Feature flags" || c.GetGroup() != "configuration" || len(got) != embedded+1 {
		t.Fatalf("with the curator's file: %d categories, feature-flags %v", len(got), c)
	}
	// The curator's file is read again when it changes.
	write(flags+"  - id: release-notes\n    group: documentation\n    name: Release notes\n    description: A change has no release note.\n    rule: Write a release note.\n    cues: [release note]\n", time.Now().Add(time.Minute))
	if got := list(&EvaluatorService{Lessons: src}); got["release-notes"] == nil {
		t.Fatal("a category added to the curator's file is not listed")
	}
	// Without a source, the embedded taxonomy.
	if got := list(&EvaluatorService{}); len(got) != embedded || got["feature-flags"] != nil {
		t.Fatalf("without a source: %d categories", len(got))
	}
}
