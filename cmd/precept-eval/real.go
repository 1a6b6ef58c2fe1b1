package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/internal/evalrun"
)

// runReal measures each split of the real-comment set and prints, after
// the usual figures, how its recurring themes fared.
func runReal(manifest, cache string, verbose bool, opts evalrun.Options) error {
	splits, err := evalrun.LoadReal(manifest, cache)
	if err != nil {
		return err
	}
	for _, name := range []string{evalrun.SplitTune, evalrun.SplitHeldout} {
		got := splits[name]
		items := make([]evalrun.Item, len(got))
		for i, it := range got {
			items[i] = it.Item
		}
		dir, err := os.MkdirTemp("", "precept-eval-real-")
		if err != nil {
			return err
		}
		evals, err := evalrun.Evaluate(context.Background(), items, dir, opts)
		os.RemoveAll(dir)
		if err != nil {
			return err
		}
		// Category errors are listed for the tuning half only: what is
		// tuned must never be chosen by looking at the held-out half.
		evalrun.Score("real-"+name, items, evals).Write(os.Stdout, verbose && name == evalrun.SplitTune)
		if verbose && name == evalrun.SplitTune {
			listErrors(got, evals)
		}
		t := evalrun.Themes(got, evals)
		fmt.Printf("  recurring themes yielding a generalizable cluster of >= 3: %d of %d", t.Yielding, t.Themes)
		if len(t.Missed) > 0 {
			fmt.Printf(" (missed: %v)", t.Missed)
		}
		fmt.Printf("; generalizable clusters of one-offs, vague comments or approvals only: %d\n", len(t.FalsePatterns))
	}
	return nil
}

// buildReal writes the manifest and the cache from the records the glob
// names.
func buildReal(manifest, cache, glob string) error {
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no records match %s", glob)
	}
	var records []evalrun.RealRecord
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		recs, err := evalrun.ReadRecords(f, path)
		f.Close()
		if err != nil {
			return err
		}
		records = append(records, recs...)
	}
	entries, err := evalrun.BuildReal(records, cache)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(manifest), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(manifest, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("%d records, %d entries (duplicates dropped) in %s; texts in %s\n", len(records), len(entries), manifest, cache)
	return nil
}

// listErrors prints each item of the tuning half whose class or category
// is wrong, with the start of its text, for the one who tunes.
func listErrors(items []evalrun.RealItem, evals []evaluator.Evaluation) {
	for i, it := range items {
		ev := evals[i]
		cat := ""
		if ev.Lesson != nil {
			cat = ev.Lesson.Category
		}
		if ev.Class == it.Class && (cat == it.Category || it.Category == "positive") {
			continue
		}
		text := []rune(it.Feedback.ReviewerComment)
		if len(text) > 140 {
			text = append(text[:140], '…')
		}
		fmt.Printf("  %s %-9s %-14s want %s/%s got %s/%s cluster %s: %q\n", it.Entry.ID, it.Entry.Kind, it.Entry.Theme,
			it.Class, it.Category, ev.Class, cat, ev.ClusterID, string(text))
	}
}
