package prompts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
)

// VersionBranch is the branch of the rules repository that records every
// prompt version served, one file versions/<version>.json each, so that a
// decision carrying prompt_version can be tied to the rules its agent ran
// with (docs/effects.md, "Which rules were in the prompt"). It is kept
// apart from main, like the Slack post records: recording a version must
// not change what prompts are built from.
const VersionBranch = "precept/prompts"

// VersionRecord says what went into one prompt version.
type VersionRecord struct {
	Version string `json:"version"`
	// Shadow: this is a shadow prompt (ShadowVersion), holding the shadow
	// rules as well.
	Shadow bool `json:"shadow,omitempty"`
	// Agent, Stage and ScopeDir are those of the first request served
	// with it (identical texts for other requests share the version).
	Agent    string `json:"agent"`
	Stage    string `json:"stage"`
	ScopeDir string `json:"scope_dir,omitempty"`
	// RuleIDs are the learned rules in the text, in order.
	RuleIDs []string `json:"rule_ids"`
	// RulesFiles are the _rules.md paths in the text.
	RulesFiles []string `json:"rules_files,omitempty"`
	// BasePrompt is the base prompt's path, or "request" when it was
	// sent with the request; BaseDigest its blob hash or sha256.
	BasePrompt string `json:"base_prompt"`
	BaseDigest string `json:"base_digest"`
	// Commit is the rules-repository commit the prompt came from.
	Commit      string    `json:"commit,omitempty"`
	FirstServed time.Time `json:"first_served"`
}

// MaxVersions bounds the version records a repository keeps: clients
// sending their own base prompt with every request make a version per
// distinct text. Past it, new versions are not recorded (and their
// decisions are attributed by agent and time); preceptd warns once.
const MaxVersions = 50000

// Contains reports whether the rule was in the prompt.
func (r VersionRecord) Contains(ruleID string) bool { return slices.Contains(r.RuleIDs, ruleID) }

// versionPath maps "v1:abcd…" to versions/v1-abcd….json.
func versionPath(version string) string {
	return "versions/" + strings.ReplaceAll(version, ":", "-") + ".json"
}

// Versions records the prompt versions an Assembler serves on
// VersionBranch. Record is cheap and never blocks on git: records wait in
// memory and Flush (called by Run every interval, and at the end) commits
// them together. Lookup answers from memory and reads the branch again
// when it does not know a version another replica may have recorded.
type Versions struct {
	repo *gitrepo.Repo
	// w writes the records: repo, or the remote with WriteThrough.
	w   gitrepo.Writer
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	known   map[string]VersionRecord
	pending map[string]VersionRecord
	tip     gitrepo.Hash
	loaded  bool
	warned  bool
}

// WriteThrough records through w (a gitrepo.Upstream) instead of the
// repository alone; set it before the records are used.
func (v *Versions) WriteThrough(w gitrepo.Writer) { v.w = w }

// NewVersions returns the version records of the rules repository repo.
func NewVersions(repo *gitrepo.Repo, now func() time.Time, log *slog.Logger) *Versions {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Versions{repo: repo, w: repo, now: now, log: log, known: map[string]VersionRecord{}, pending: map[string]VersionRecord{}}
}

// Observe records the versions of an assembled prompt: the main text's
// and, when there is one, the shadow text's. It is the Assembler's
// Options.OnAssembled.
func (v *Versions) Observe(req Request, p *Prompt) {
	if p == nil {
		return
	}
	base := VersionRecord{Agent: req.Agent, Stage: req.Stage, ScopeDir: scopeDir(req.ScopePath), Commit: p.Commit, FirstServed: v.now().UTC()}
	for _, s := range p.Sources {
		switch s.Kind {
		case SourceBasePrompt:
			base.BasePrompt, base.BaseDigest = s.Ref, s.Digest
		case SourceRulesFile:
			base.RulesFiles = append(base.RulesFiles, s.Ref)
		}
	}
	main := base
	main.Version, main.RuleIDs = p.Version, slices.Clone(p.RuleIDs)
	v.record(main)
	if p.ShadowVersion != "" {
		shadow := base
		shadow.Version, shadow.Shadow = p.ShadowVersion, true
		shadow.RulesFiles = slices.Clone(base.RulesFiles)
		shadow.RuleIDs = slices.Clone(p.ShadowTextRuleIDs)
		v.record(shadow)
	}
}

func (v *Versions) record(r VersionRecord) {
	if r.RuleIDs == nil {
		r.RuleIDs = []string{}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.known[r.Version]; ok {
		return
	}
	if len(v.known) >= MaxVersions {
		if !v.warned {
			v.warned = true
			v.log.Warn("prompt versions are no longer recorded: the limit is reached; decisions with new versions are attributed by agent and time",
				"limit", MaxVersions)
		}
		return
	}
	v.known[r.Version] = r
	v.pending[r.Version] = r
}

// Lookup returns the record of a version.
func (v *Versions) Lookup(ctx context.Context, version string) (VersionRecord, bool, error) {
	v.mu.Lock()
	r, ok := v.known[version]
	v.mu.Unlock()
	if ok {
		return r, true, nil
	}
	if err := v.Load(ctx); err != nil {
		return VersionRecord{}, false, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok = v.known[version]
	return r, ok, nil
}

// All returns every known record.
func (v *Versions) All() map[string]VersionRecord {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]VersionRecord, len(v.known))
	for k, r := range v.known {
		out[k] = r
	}
	return out
}

// Select returns the known records keep accepts, in no particular order;
// unlike All it copies only those.
func (v *Versions) Select(keep func(VersionRecord) bool) []VersionRecord {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []VersionRecord
	for _, r := range v.known {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// Load reads the records on the branch when its tip moved since the last
// read.
func (v *Versions) Load(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tip, err := v.repo.Tip(VersionBranch)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("prompt versions: %w", err)
	}
	v.mu.Lock()
	same := v.loaded && tip == v.tip
	v.mu.Unlock()
	if same {
		return nil
	}
	snap, err := v.repo.SnapshotAt(tip)
	if err != nil {
		return fmt.Errorf("prompt versions: %w", err)
	}
	found := map[string]VersionRecord{}
	err = snap.Walk("versions", func(file string, blob gitrepo.Hash) error {
		data, err := v.repo.ReadBlob(blob)
		if err != nil {
			return err
		}
		var r VersionRecord
		if err := json.Unmarshal(data, &r); err != nil || r.Version == "" {
			// One unreadable record must not hide the others: decisions
			// made with it are attributed by agent and time.
			v.log.Warn("unreadable prompt version record; ignored", "path", path.Clean(file), "err", err)
			return nil
		}
		found[r.Version] = r
		return nil
	})
	if err != nil {
		return fmt.Errorf("prompt versions: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, r := range found {
		if _, ok := v.known[k]; !ok {
			v.known[k] = r
		}
	}
	v.tip, v.loaded = tip, true
	return nil
}

// Flush commits the records waiting in memory in one commit. A record
// another replica committed first is kept as it is.
func (v *Versions) Flush(ctx context.Context) error {
	v.mu.Lock()
	batch := make([]VersionRecord, 0, len(v.pending))
	for _, r := range v.pending {
		batch = append(batch, r)
	}
	v.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	slices.SortFunc(batch, func(a, b VersionRecord) int { return strings.Compare(a.Version, b.Version) })
	_, err := v.w.Update(ctx, VersionBranch, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		var changes []gitrepo.Change
		for _, r := range batch {
			if ok, err := s.Exists(versionPath(r.Version)); err != nil || ok {
				if err != nil {
					return nil, err
				}
				continue
			}
			data, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				return nil, err
			}
			changes = append(changes, gitrepo.Change{Path: versionPath(r.Version), Data: append(data, '\n')})
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{Message: fmt.Sprintf("Record %d prompt version(s)", len(changes)), Changes: changes}, nil
	})
	if err != nil {
		return fmt.Errorf("record prompt versions: %w", err)
	}
	v.mu.Lock()
	for _, r := range batch {
		delete(v.pending, r.Version)
	}
	v.mu.Unlock()
	return nil
}

// Run flushes every interval until ctx is done, then once more.
func (v *Versions) Run(ctx context.Context, interval time.Duration) error {
	if err := v.Load(ctx); err != nil {
		v.log.Warn("load prompt versions", "err", err)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return v.Flush(fctx)
		case <-t.C:
			if err := v.Flush(ctx); err != nil && ctx.Err() == nil {
				v.log.Warn("record prompt versions", "err", err)
			}
		}
	}
}
