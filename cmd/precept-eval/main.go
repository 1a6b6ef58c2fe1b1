// Command precept-eval measures precept's judgement on labelled feedback
// (`make eval`; docs/lessons.md, "Evaluation"): for each file it prints
// pairwise clustering precision, recall and F1, class accuracy, category
// accuracy and the confusion of classes, through the real evaluator on
// its embedded defaults.
//
//	precept-eval [-v] [file.jsonl ...]
//
// Without files it reads every testdata/feedback/*.jsonl.
package main

import (
	"context"
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
	flag.Parse()
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
