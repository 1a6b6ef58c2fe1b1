package evalrun

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/durable"
)

// RealRecord is a gathered comment as a curator labelled it, text
// included. Records live outside the repository; BuildReal turns them
// into the manifest and the cache.
type RealRecord struct {
	RealLabels
	// Reviewer is the author as the thread shows them; the manifest
	// keeps only a pseudonym.
	Reviewer string `json:"reviewer"`
	Text     string `json:"text"`
}

// ReadRecords reads gathered records, one JSON object a line.
func ReadRecords(r io.Reader, name string) ([]RealRecord, error) {
	var out []RealRecord
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var rec RealRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		rec.Text = strings.TrimSpace(rec.Text)
		if rec.Text == "" && rec.Kind != KindApproval {
			return nil, fmt.Errorf("%s:%d: no text", name, line)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// BuildReal writes each record's text to cache under its SHA-256 and
// returns the manifest: records whose text was seen before are dropped,
// each theme's threads are dealt between the two splits so that a thread
// never straddles them, and the expected class of each entry follows the
// labelling rules of testdata/feedback/README.md within its split.
func BuildReal(records []RealRecord, cache string) ([]RealEntry, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var entries []RealEntry
	tax := lesson.DefaultTaxonomy()
	for _, rec := range records {
		if _, ok := tax.Category(rec.Category); !ok && rec.Kind != KindApproval && rec.Kind != KindVague {
			return nil, fmt.Errorf("%s: category %q is not in the taxonomy (lesson/categories.txt)", rec.Source, rec.Category)
		}
		sum := sha256.Sum256([]byte(rec.Text))
		h := hex.EncodeToString(sum[:])
		if seen[h] {
			continue
		}
		seen[h] = true
		path := filepath.Join(cache, h+".txt")
		if err := os.WriteFile(path+".tmp", []byte(rec.Text), 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return nil, err
		}
		labels := rec.RealLabels
		switch labels.Kind {
		case KindApproval:
			labels.Theme, labels.Category = "positive", "positive"
		case KindVague:
			labels.Category = "unclear"
		}
		e := RealEntry{ID: "real-" + h[:12], RealLabels: labels, Reviewer: "r-" + short(rec.Reviewer), SHA256: h}
		if e.Gate == "" {
			e.Gate = "code-review"
		}
		entries = append(entries, e)
	}
	if err := durable.SyncDir(cache); err != nil {
		return nil, err
	}
	split(entries)
	classify(entries)
	for _, e := range entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Source, err)
		}
	}
	slices.SortStableFunc(entries, func(a, b RealEntry) int {
		return cmp.Or(cmp.Compare(a.Split, b.Split), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Theme, b.Theme), cmp.Compare(a.ID, b.ID))
	})
	return entries, nil
}

// split deals each group's threads (a recurring theme, or all one-offs,
// vague comments or approvals) to the split holding fewer of the group's
// comments, threads in the order of their hash so the deal is stable.
func split(entries []RealEntry) {
	type key struct{ group, thread string }
	byThread := map[key][]int{}
	for i, e := range entries {
		g := e.Kind
		if e.Kind == KindRecurring {
			g += "/" + e.Theme
		}
		byThread[key{g, e.Thread}] = append(byThread[key{g, e.Thread}], i)
	}
	keys := make([]key, 0, len(byThread))
	for k := range byThread {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(short(a.thread), short(b.thread)))
	})
	count := map[string]map[string]int{}
	for _, k := range keys {
		if count[k.group] == nil {
			count[k.group] = map[string]int{}
		}
		to := SplitTune
		if count[k.group][SplitHeldout] < count[k.group][SplitTune] {
			to = SplitHeldout
		}
		for _, i := range byThread[k] {
			entries[i].Split = to
		}
		count[k.group][to] += len(byThread[k])
	}
}

// classify sets each entry's expected class within its split: approvals
// POSITIVE, vague comments AMBIGUOUS, one-offs EDGE_CASE, and a recurring
// theme HIGH with ≥ 3 comments from ≥ 2 reviewers in ≥ 2 threads, LOW
// with ≥ 2 comments from ≥ 2 reviewers, else EDGE_CASE.
func classify(entries []RealEntry) {
	type stats struct {
		n                  int
		reviewers, threads map[string]bool
	}
	themes := map[[2]string]*stats{}
	for _, e := range entries {
		if e.Kind != KindRecurring {
			continue
		}
		k := [2]string{e.Split, e.Theme}
		s := themes[k]
		if s == nil {
			s = &stats{reviewers: map[string]bool{}, threads: map[string]bool{}}
			themes[k] = s
		}
		s.n++
		s.reviewers[e.Reviewer] = true
		s.threads[e.Thread] = true
	}
	for i, e := range entries {
		c := evaluator.EdgeCase
		switch e.Kind {
		case KindApproval:
			c = evaluator.Positive
		case KindVague:
			c = evaluator.Ambiguous
		case KindRecurring:
			s := themes[[2]string{e.Split, e.Theme}]
			switch {
			case s.n >= 3 && len(s.reviewers) >= 2 && len(s.threads) >= 2:
				c = evaluator.GeneralizableHigh
			case s.n >= 2 && len(s.reviewers) >= 2:
				c = evaluator.GeneralizableLow
			}
		}
		entries[i].Class = string(c)
	}
}
