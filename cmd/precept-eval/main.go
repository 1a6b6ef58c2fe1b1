// Command precept-eval measures precept's judgement on labelled feedback
// (`make eval`; docs/lessons.md, "Evaluation"): for each file it prints
// pairwise clustering precision, recall and F1, class accuracy, category
// accuracy and the confusion of classes, through the real evaluator on
// its embedded defaults.
//
//	precept-eval [-v] [file.jsonl ...]
//	precept-eval -real testdata/real/manifest.jsonl
//	precept-eval -real testdata/real/manifest.jsonl -real-build 'records/*.jsonl'
//
// Without files it reads every testdata/feedback/*.jsonl. With -real it
// measures the real-comment development set (`make eval-real`): the
// manifest in the repository, the texts in the git-ignored cache
// (PRECEPT_REAL_CACHE, default .cache/real-comments), each split
// reported on its own. -real-build writes the manifest and the cache
// from gathered, labelled records kept outside the repository.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/precept-dev/precept/internal/evalrun"
)

func main() {
	verbose := flag.Bool("v", false, "list category errors")
	linkage := flag.Float64("linkage", 0, "evaluator.linkage_threshold to measure (0: the default)")
	manifest := flag.String("real", "", "measure the real-comment set of this manifest")
	build := flag.String("real-build", "", "write the -real manifest and the cache from the records these files (a glob) hold")
	flag.Parse()
	if *manifest != "" {
		cache := cmp.Or(os.Getenv("PRECEPT_REAL_CACHE"), evalrun.DefaultRealCache)
		var err error
		if *build != "" {
			err = buildReal(*manifest, cache, *build)
		} else {
			err = runReal(*manifest, cache, *verbose, evalrun.Options{LinkageThreshold: *linkage})
		}
		if errors.Is(err, evalrun.ErrNoRealCache) {
			fmt.Fprintf(os.Stderr, "precept-eval: %v\n  The texts are not in the repository (docs/lessons.md, \"Real reviewers' words\"); nothing was measured.\n", err)
			os.Exit(3)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "precept-eval: %v\n", err)
			os.Exit(1)
		}
		return
	}
	files := flag.Args()
	if len(files) == 0 {
		var err error
		if files, err = filepath.Glob("testdata/feedback/*.jsonl"); err != nil || len(files) == 0 {
			fmt.Fprintln(os.Stderr, "precept-eval: no files given and none in testdata/feedback")
			os.Exit(2)
		}
	}
	failed := false
	for _, path := range files {
		if err := run(path, *verbose, evalrun.Options{LinkageThreshold: *linkage}); err != nil {
			fmt.Fprintf(os.Stderr, "precept-eval: %s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func run(path string, verbose bool, opts evalrun.Options) error {
	items, err := evalrun.Load(path)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "precept-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r, err := evalrun.Run(context.Background(), strings.TrimSuffix(filepath.Base(path), ".jsonl"), items, dir, opts)
	if err != nil {
		return err
	}
	r.Write(os.Stdout, verbose)
	return nil
}
