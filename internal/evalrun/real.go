package evalrun

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
)

// The real-comment development set (docs/lessons.md, "Real reviewers'
// words"): review comments from public threads, labelled here. The
// repository holds only the manifest — where each comment came from, its
// labels and the SHA-256 of its text. The texts stay in a git-ignored
// cache (DefaultRealCache) and are never committed.

// DefaultRealCache is where the texts of the real set are kept, relative
// to the module root; git ignores it. PRECEPT_REAL_CACHE overrides it.
const DefaultRealCache = ".cache/real-comments"

// ErrNoRealCache is returned when the cache holds none of the manifest's
// texts: the set cannot be measured on this machine.
var ErrNoRealCache = errors.New("the real-comment cache is absent")

// Kinds of real comments.
const (
	KindRecurring = "recurring"
	KindOneOff    = "one-off"
	KindVague     = "vague"
	KindApproval  = "approval"
)

// Splits of the real set: tuning may look at Tune, never at Heldout.
const (
	SplitTune    = "tune"
	SplitHeldout = "heldout"
)

// RealLabels are where a comment was read and how it is labelled, the
// same in a gathered record and in the manifest.
type RealLabels struct {
	Source   string `json:"source"`
	Thread   string `json:"thread"`
	Gate     string `json:"gate"`
	Decision string `json:"decision"`
	Kind     string `json:"kind"`
	Theme    string `json:"theme"`
	Category string `json:"category"`
}

// RealEntry is one line of the manifest: the labels, a pseudonym of the
// reviewer, the expected class and split, and the text's SHA-256.
type RealEntry struct {
	ID string `json:"id"`
	RealLabels
	Reviewer string `json:"reviewer"`
	Class    string `json:"expected_class"`
	Split    string `json:"split"`
	SHA256   string `json:"sha256"`
}

// RealItem is a manifest entry with its text, as the evaluator sees it.
type RealItem struct {
	Item
	Entry RealEntry
}

// LoadReal reads the manifest and the texts the cache holds for it,
// checking each text against its SHA-256. It returns the items by split.
// A cache that holds none of the texts is ErrNoRealCache; one that holds
// some is an error naming how many are missing, so a partial cache never
// yields figures that look complete.
func LoadReal(manifest, cache string) (map[string][]RealItem, error) {
	entries, err := ReadManifest(manifest)
	if err != nil {
		return nil, err
	}
	out := map[string][]RealItem{}
	missing := 0
	for i, e := range entries {
		text, err := os.ReadFile(filepath.Join(cache, e.SHA256+".txt"))
		if errors.Is(err, os.ErrNotExist) {
			missing++
			continue
		}
		if err != nil {
			return nil, err
		}
		if sum := sha256.Sum256(text); hex.EncodeToString(sum[:]) != e.SHA256 {
			return nil, fmt.Errorf("%s: the cached text of %s does not match its SHA-256", cache, e.ID)
		}
		it, err := e.item(string(text), i)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", manifest, e.ID, err)
		}
		out[e.Split] = append(out[e.Split], RealItem{Item: it, Entry: e})
	}
	switch {
	case missing == len(entries):
		return nil, fmt.Errorf("%w: %s holds none of the %d texts of %s", ErrNoRealCache, cache, len(entries), manifest)
	case missing > 0:
		return nil, fmt.Errorf("%s holds %d of the %d texts of %s: %d missing", cache, len(entries)-missing, len(entries), manifest, missing)
	}
	return out, nil
}

// ReadManifest reads and checks the manifest's entries.
func ReadManifest(path string) ([]RealEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []RealEntry
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e RealEntry
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if seen[e.ID] {
			return nil, fmt.Errorf("%s:%d: id %s twice", path, line, e.ID)
		}
		seen[e.ID] = true
		out = append(out, e)
	}
	return out, sc.Err()
}

func (e RealEntry) check() error {
	switch {
	case e.ID == "" || e.Source == "" || e.Thread == "" || e.Reviewer == "" || e.Theme == "" || e.Category == "":
		return errors.New("id, source, thread, reviewer, theme and category are required")
	case len(e.SHA256) != 64:
		return errors.New("sha256 must be 64 hex digits")
	case e.Kind != KindRecurring && e.Kind != KindOneOff && e.Kind != KindVague && e.Kind != KindApproval:
		return fmt.Errorf("kind %q is not recurring, one-off, vague or approval", e.Kind)
	case e.Split != SplitTune && e.Split != SplitHeldout:
		return fmt.Errorf("split %q is not tune or heldout", e.Split)
	}
	if _, err := hex.DecodeString(e.SHA256); err != nil {
		return errors.New("sha256 must be 64 hex digits")
	}
	return nil
}

// agentFor is the agent whose output a gate reviews: design reviews judge
// a planner's documents, code reviews a coding agent's changes.
func agentFor(gate string) string {
	if gate == "design-review" {
		return "planner-agent"
	}
	return "coding-agent"
}

// item is the decision event the entry stands for: the comment as the
// reviewer wrote it, the thread as the epic, a timestamp in manifest
// order.
func (e RealEntry) item(text string, i int) (Item, error) {
	gate := "HITL-CODE"
	if e.Gate == "design-review" {
		gate = "HITL-DESIGN"
	}
	d := precept.Decision{
		DecisionID:      e.ID,
		GateID:          gate,
		EpicID:          "epic-" + short(e.Thread),
		Agent:           agentFor(e.Gate),
		Decision:        precept.Verdict(e.Decision),
		ReviewerID:      "reviewer-" + short(e.Reviewer),
		Timestamp:       time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute),
		ReviewerComment: text,
	}
	if err := d.Validate(precept.Limits{}, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		return Item{}, err
	}
	return Item{
		Feedback: precept.NewFeedback(d, "eval", d.Timestamp),
		Cluster:  e.Theme,
		Category: e.Category,
		Class:    evaluator.Class(e.Class),
	}, nil
}

// short is a stable pseudonym: the first 10 hex digits of s's SHA-256.
func short(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
}

// ThemeReport says, for one split, how the recurring themes fared: a
// theme yields a proposal when at least three of its comments share one
// generalizable cluster; a generalizable cluster made only of one-offs,
// vague comments or approvals is a false pattern.
type ThemeReport struct {
	Themes, Yielding int
	Missed           []string
	FalsePatterns    []string
}

// Themes scores the recurring themes of items against their evaluations
// (one per item, in order). Only themes with comments from at least three
// reviewers in at least two threads are counted, as the target says.
func Themes(items []RealItem, evals []evaluator.Evaluation) ThemeReport {
	type theme struct {
		reviewers, threads map[string]bool
		inCluster          map[string]int
	}
	themes := map[string]*theme{}
	members := map[string][]string{} // generalizable cluster -> kinds
	for i, it := range items {
		ev := evals[i]
		general := ev.Class == evaluator.GeneralizableHigh || ev.Class == evaluator.GeneralizableLow
		if general && ev.ClusterID != "" {
			members[ev.ClusterID] = append(members[ev.ClusterID], it.Entry.Kind)
		}
		if it.Entry.Kind != KindRecurring {
			continue
		}
		t := themes[it.Entry.Theme]
		if t == nil {
			t = &theme{reviewers: map[string]bool{}, threads: map[string]bool{}, inCluster: map[string]int{}}
			themes[it.Entry.Theme] = t
		}
		t.reviewers[it.Entry.Reviewer] = true
		t.threads[it.Entry.Thread] = true
		if general && ev.ClusterID != "" {
			t.inCluster[ev.ClusterID]++
		}
	}
	var r ThemeReport
	for name, t := range themes {
		if len(t.reviewers) < 3 || len(t.threads) < 2 {
			continue
		}
		r.Themes++
		best := 0
		for _, n := range t.inCluster {
			best = max(best, n)
		}
		if best >= 3 {
			r.Yielding++
		} else {
			r.Missed = append(r.Missed, name)
		}
	}
	for id, kinds := range members {
		recurring := false
		for _, k := range kinds {
			recurring = recurring || k == KindRecurring
		}
		if !recurring {
			r.FalsePatterns = append(r.FalsePatterns, id)
		}
	}
	sort.Strings(r.Missed)
	sort.Strings(r.FalsePatterns)
	return r
}
