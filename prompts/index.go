package prompts

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Repository layout (docs/formats.md).
const (
	promptsDir    = "prompts"
	rulesFileName = "_rules.md"
)

// maxFileBytes bounds a base prompt, _rules.md or rule file: anything
// larger is left out as invalid rather than pasted into every prompt.
const maxFileBytes = 1 << 20

// Repo is what prompt assembly reads from the rules repository.
type Repo interface {
	// Tip returns the commit a branch points to, or an error wrapping
	// gitrepo.ErrNotFound when the branch does not exist.
	Tip(branch string) (gitrepo.Hash, error)
	// SnapshotAt returns the tree of a commit.
	SnapshotAt(commit gitrepo.Hash) (*gitrepo.Snapshot, error)
	// ReadBlob returns the content of a blob.
	ReadBlob(h gitrepo.Hash) ([]byte, error)
}

var _ Repo = (*gitrepo.Repo)(nil)

// document is a base prompt or _rules.md file.
type document struct {
	path string
	blob gitrepo.Hash
	// text is the content without surrounding blank lines and with LF
	// line endings; empty files are kept so Explain can say so.
	text string
	// problem says why the file is not used, or is "".
	problem string
}

// rule is one rule file in an agent's directory.
type rule struct {
	rulefmt.Rule
	path string
	blob gitrepo.Hash
	// problem says why the file could not be used; Rule is then zero
	// except for the ID taken from the file name, unless unsafe.
	problem string
	// unsafe says the rule was read but its text fails the checks of
	// lib/safetext; Rule holds it with secrets redacted.
	unsafe bool
}

// agentRules are the rule files in one agent's directory.
type agentRules struct {
	// active and shadow are in prompt order (see byRank).
	active, shadow []*rule
	// other holds rules in any other status and files that did not parse.
	other []*rule
}

// index is everything prompts need from one commit of main. It is
// immutable once built, except for its cache.
type index struct {
	commit  gitrepo.Hash
	stages  map[string]*document   // stage -> prompts/<stage>.md
	dirs    map[string]*document   // directory under prompts/ ("" itself) -> _rules.md
	agents  map[string]*agentRules // agent -> its rules
	changed chan struct{}          // closed when a newer index replaces this one
	cache   *cache
}

func newIndex(commit gitrepo.Hash, cacheSize int) *index {
	return &index{
		commit:  commit,
		stages:  map[string]*document{},
		dirs:    map[string]*document{},
		agents:  map[string]*agentRules{},
		changed: make(chan struct{}),
		cache:   newCache(cacheSize),
	}
}

// parsed is what a blob was read as; indexes share it across commits,
// so a rebuild reads only blobs that changed.
type parsed struct {
	text    string
	rule    *rulefmt.Rule
	problem string
	unsafe  bool
}

// loader builds indexes, remembering parsed blobs between builds.
type loader struct {
	repo      Repo
	cacheSize int
	// blobs holds what the last index used, keyed by blob and by kind
	// (the same content may be a document and a rule). load replaces the
	// map and never changes it in place (BuildAt reads it unlocked).
	blobs map[blobKey]parsed
	// warn is told once about each file that cannot be used.
	warn func(path, problem string)
	// denylist adds phrases to safetext's denylist for rules and
	// _rules.md files.
	denylist []string
}

// fileKind says how a blob is read: the same content may be a base
// prompt, a _rules.md file and a rule file, and each is checked
// differently.
type fileKind uint8

const (
	basePromptKind fileKind = iota
	rulesMDKind
	ruleKind
)

type blobKey struct {
	blob gitrepo.Hash
	kind fileKind
}

// load indexes the commit; the zero hash gives an empty index.
func (l *loader) load(commit gitrepo.Hash) (*index, error) {
	ix := newIndex(commit, l.cacheSize)
	if commit.IsZero() {
		l.blobs = map[blobKey]parsed{}
		return ix, nil
	}
	snap, err := l.repo.SnapshotAt(commit)
	if err != nil {
		return nil, fmt.Errorf("read rules commit %s: %w", commit, err)
	}
	seen := map[blobKey]parsed{}
	read := func(p string, blob gitrepo.Hash, kind fileKind) (parsed, error) {
		key := blobKey{blob, kind}
		if v, ok := seen[key]; ok {
			return v, nil
		}
		v, ok := l.blobs[key]
		if !ok {
			data, err := l.repo.ReadBlob(blob)
			if err != nil {
				return parsed{}, fmt.Errorf("read %s: %w", p, err)
			}
			v = parseBlob(data, kind, l.denylist)
			if v.problem != "" && l.warn != nil {
				l.warn(p, v.problem)
			}
		}
		seen[key] = v
		return v, nil
	}

	err = snap.Walk(promptsDir, func(p string, blob gitrepo.Hash) error {
		rel := strings.TrimPrefix(p, promptsDir+"/")
		dir, name := "", rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			dir, name = rel[:i], rel[i+1:]
		}
		var target map[string]*document
		var key string
		var kind fileKind
		switch {
		case name == rulesFileName:
			target, key, kind = ix.dirs, dir, rulesMDKind
		case dir == "" && strings.HasSuffix(name, ".md") && safeName(strings.TrimSuffix(name, ".md")):
			target, key, kind = ix.stages, strings.TrimSuffix(name, ".md"), basePromptKind
		default:
			return nil
		}
		v, err := read(p, blob, kind)
		if err != nil {
			return err
		}
		target[key] = &document{path: p, blob: blob, text: v.text, problem: v.problem}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", promptsDir, err)
	}

	err = snap.Walk(rulefmt.ActiveDir, func(p string, blob gitrepo.Hash) error {
		rel := strings.TrimPrefix(p, rulefmt.ActiveDir+"/")
		agent, file, ok := strings.Cut(rel, "/")
		if !ok || strings.Contains(file, "/") || !safeName(agent) || !strings.HasSuffix(file, ".md") {
			return nil
		}
		v, err := read(p, blob, ruleKind)
		if err != nil {
			return err
		}
		r := &rule{path: p, blob: blob, problem: v.problem, unsafe: v.unsafe}
		if v.rule != nil {
			r.Rule = *v.rule
		}
		id := strings.TrimSuffix(file, ".md")
		switch {
		case r.problem != "" && !r.unsafe:
			r.ID = id
		case r.ID != id:
			r.problem, r.unsafe = fmt.Sprintf("rule_id %q does not match the file name %s", r.ID, file), false
			r.ID = id
		}
		ar := ix.agents[agent]
		if ar == nil {
			ar = &agentRules{}
			ix.agents[agent] = ar
		}
		switch {
		case r.problem != "":
			ar.other = append(ar.other, r)
		case r.Status == rulefmt.Active:
			ar.active = append(ar.active, r)
		case r.Status == rulefmt.Shadow:
			ar.shadow = append(ar.shadow, r)
		default:
			ar.other = append(ar.other, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", rulefmt.ActiveDir, err)
	}
	for _, ar := range ix.agents {
		slices.SortFunc(ar.active, byRank)
		slices.SortFunc(ar.shadow, byRank)
	}
	l.blobs = seen
	return ix, nil
}

// parseBlob reads a file as a document or a rule file. The text of a
// _rules.md file or a rule passes lib/safetext's checks (control
// characters, secrets, the denylist with extra phrases), as the quality
// gate's do, so that what reached the repository past the gate (edited
// in git, or approved before a check existed) is never served
// (docs/decisions/0010-text-safety.md). Base prompts are the operators'
// own instructions and are not checked.
func parseBlob(data []byte, kind fileKind, denylist []string) parsed {
	if len(data) > maxFileBytes {
		return parsed{problem: fmt.Sprintf("%d bytes is more than the maximum of %d", len(data), maxFileBytes)}
	}
	switch kind {
	case basePromptKind:
		return parsed{text: normalizeText(string(data))}
	case rulesMDKind:
		text := normalizeText(string(data))
		if reason := safetext.Check(text, denylist); reason != "" {
			return parsed{problem: "its text " + reason, unsafe: true}
		}
		return parsed{text: text}
	}
	r, err := rulefmt.ParseRule(data)
	if err != nil {
		return parsed{problem: err.Error()}
	}
	if !safeName(r.ID) {
		return parsed{problem: fmt.Sprintf("rule_id %q is not a safe name", r.ID)}
	}
	r.Content = normalizeText(r.Content)
	if reason := safetext.Check(r.Content, denylist); reason != "" {
		// Explain shows the rule; never with a secret in it.
		r.Content = safetext.Redact(r.Content)
		r.EvidenceSummary = safetext.Redact(r.EvidenceSummary)
		return parsed{rule: &r, problem: "its text " + reason, unsafe: true}
	}
	return parsed{rule: &r}
}

// normalizeText uses LF line endings, drops trailing spaces on each line
// and blank lines around the text, so cosmetic edits do not change
// versions.
func normalizeText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// byRank orders rules as they appear in a prompt: importance first, then
// confidence, then id, so the order never depends on file order.
func byRank(a, b *rule) int {
	if c := cmp.Compare(b.Importance.Rank(), a.Importance.Rank()); c != 0 {
		return c
	}
	if c := cmp.Compare(confidence(b), confidence(a)); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// confidence treats a NaN (a hand-edited ".nan") as no confidence, so
// sorting stays a total order.
func confidence(r *rule) float64 {
	if math.IsNaN(r.Confidence) {
		return -1
	}
	return r.Confidence
}
