package prompts

import (
	"container/list"
	"context"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// BuildAt returns the prompt for req as it is assembled from commit of
// the rules repository, for instance the commit a recorded version came
// from (VersionRecord.Commit; "" is the state before main existed). The
// commit is read into an index of its own: the prompts served, their
// cache and the versions recorded are left alone (OnAssembled is not
// called). Files whose blobs the current index holds are not read again.
func (a *Assembler) BuildAt(ctx context.Context, req Request, commit string) (*Prompt, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	h, err := parseCommit(commit)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ix := a.state.Load()
	if ix.commit != h {
		if ix, err = a.indexAt(h); err != nil {
			return nil, err
		}
	}
	return ix.assemble(req, scopeDir(req.ScopePath), a.opts.MaxRules)
}

// indexAt reads a commit other than the one prompts follow, with a loader
// of its own seeded with the blobs the live loader parsed last.
func (a *Assembler) indexAt(commit gitrepo.Hash) (*index, error) {
	a.refreshMu.Lock()
	// load replaces its blobs map and never changes one in place, so the
	// map can be read after the lock is released.
	known := a.loader.blobs
	a.refreshMu.Unlock()
	l := loader{repo: a.repo, cacheSize: 1, denylist: a.opts.Denylist, blobs: known}
	ix, err := l.load(commit)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return nil, precept.Errorf(precept.NotFound, "commit %s is not in the rules repository", commit)
	}
	return ix, err
}

// parseCommit reads a full hexadecimal commit id; "" is the zero hash.
func parseCommit(s string) (gitrepo.Hash, error) {
	var h gitrepo.Hash
	if s == "" {
		return h, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, precept.Errorf(precept.Invalid, "commit: %q is not a full hexadecimal commit id", s)
	}
	copy(h[:], b)
	return h, nil
}

// Request returns the request a recorded version can be built again from,
// false when its base prompt was sent with the request: only the base
// prompt's digest is recorded, not its text.
func (r VersionRecord) Request() (Request, bool) {
	if r.BasePrompt == RequestRef {
		return Request{}, false
	}
	req := Request{Agent: r.Agent, Stage: r.Stage}
	if r.ScopeDir != "" {
		req.ScopePath = r.ScopeDir + "/"
	}
	return req, true
}

// Rebuild returns the text of a recorded version, assembled again from
// its commit with BuildAt. It fails with FailedPrecondition when the text
// cannot be the one served: its base prompt came with the request, or the
// text assembled now has another version (prompts.max_rules or the
// denylist changed since). Texts are kept in a small cache by version.
func (a *Assembler) Rebuild(ctx context.Context, r VersionRecord) (string, error) {
	if text, ok := a.rebuilt.get(r.Version); ok {
		return text, nil
	}
	req, ok := r.Request()
	if !ok {
		return "", precept.Errorf(precept.FailedPrecondition,
			"version %s was served with a base prompt sent by the client; only its digest is recorded, so its text cannot be rebuilt", r.Version)
	}
	p, err := a.BuildAt(ctx, req, r.Commit)
	if err != nil {
		return "", err
	}
	text, got := p.Text, p.Version
	if r.Shadow {
		text, got = p.ShadowText, p.ShadowVersion
	}
	if got != r.Version {
		return "", precept.Errorf(precept.FailedPrecondition,
			"version %s assembled again from commit %s gives version %q: the configuration (prompts.max_rules, the denylist) changed since it was served", r.Version, r.Commit, got)
	}
	a.rebuilt.put(r.Version, text)
	return text, nil
}

// rebuiltTexts is how many rebuilt texts Rebuild keeps.
const rebuiltTexts = 64

// textLRU keeps the texts of recent versions, least recently used out
// first. A version names its text, so entries never go stale.
type textLRU struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *textEntry, most recent first
	byKey map[string]*list.Element
}

type textEntry struct{ version, text string }

func newTextLRU(max int) *textLRU {
	return &textLRU{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *textLRU) get(version string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[version]
	if !ok {
		return "", false
	}
	c.order.MoveToFront(e)
	return e.Value.(*textEntry).text, true
}

func (c *textLRU) put(version, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[version]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.byKey[version] = c.order.PushFront(&textEntry{version, text})
	if c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*textEntry).version)
	}
}

// Agents returns the agents that have a directory of rules on the commit
// prompts follow, in name order.
func (a *Assembler) Agents() []string { return slices.Sorted(maps.Keys(a.state.Load().agents)) }

// Stages returns the stages that have a base prompt on the commit prompts
// follow, in name order.
func (a *Assembler) Stages() []string { return slices.Sorted(maps.Keys(a.state.Load().stages)) }
