package slackapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// PostBranch is the branch of the rules repository that records where
// proposals were posted, one file slack/<proposal_id>.yaml each. It is
// kept apart from the proposal branches and main: recording a post must
// not change a rule PR, nor fill main's audit log with bookkeeping
// (docs/decisions/0006-slack-side-branch.md). With a remote, the rule
// manager pushes and fetches it with main (rules.Remote.Branches).
const PostBranch = "precept/slack"

func postPath(id string) string { return "slack/" + id + ".yaml" }

// Post says whether and where a proposal was posted to Slack, so that a
// restarted server, or another replica, updates the same message.
type Post struct {
	Channel        string    `yaml:"channel,omitempty"`
	TS             string    `yaml:"ts,omitempty"`
	Permalink      string    `yaml:"permalink,omitempty"`
	Posted         bool      `yaml:"posted"`
	Attempts       int       `yaml:"attempts,omitempty"`
	LastError      string    `yaml:"last_error,omitempty"`
	UpdatedAt      time.Time `yaml:"updated_at"`
	PostedRevision int       `yaml:"posted_revision,omitempty"`
	// RemindedAt is when the last approval reminder was posted in the
	// thread, zero when none was; the next is due an approval SLA later.
	RemindedAt time.Time `yaml:"reminded_at,omitempty"`
	// RemindedPeriod is what records made before RemindedAt kept: the
	// last SLA period reminded (rules.Overdue). Read, never written.
	RemindedPeriod int64 `yaml:"reminded_period,omitempty"`
}

// shown reports whether the post is a message in Slack.
func (p *Post) shown() bool {
	return p != nil && p.Posted && p.Channel != "" && p.TS != ""
}

// Proposals is what Posts checks a proposal against before recording its
// post; rules.Manager implements it.
type Proposals interface {
	Get(ctx context.Context, id string) (rulefmt.Proposal, error)
}

// Posts records the Post of each proposal on PostBranch of the rules
// repository. Reads are answered from the records at the branch's tip,
// read again only when the tip moves; Set commits with compare-and-swap,
// so replicas sharing the repository record their posts side by side.
type Posts struct {
	repo *gitrepo.Repo
	// w writes the records: repo, or the remote with WriteThrough.
	w         gitrepo.Writer
	proposals Proposals
	now       func() time.Time
	log       *slog.Logger

	mu   sync.Mutex
	tip  gitrepo.Hash
	byID map[string]Post
}

// WriteThrough records through w (a gitrepo.Upstream) instead of the
// repository alone; set it before the records are used.
func (p *Posts) WriteThrough(w gitrepo.Writer) { p.w = w }

// NewPosts returns the post records of the rules repository repo; now
// stamps records (time.Now when nil).
func NewPosts(repo *gitrepo.Repo, proposals Proposals, now func() time.Time, log *slog.Logger) *Posts {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Posts{repo: repo, w: repo, proposals: proposals, now: now, log: log, byID: map[string]Post{}}
}

// Get returns a proposal's post; ok is false when it was never posted
// nor tried.
func (p *Posts) Get(ctx context.Context, id string) (Post, bool, error) {
	all, err := p.all(ctx)
	if err != nil {
		return Post{}, false, err
	}
	post, ok := all[id]
	return post, ok, nil
}

// all returns every record at the branch's tip.
func (p *Posts) all(ctx context.Context) (map[string]Post, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tip, err := p.repo.Tip(PostBranch)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return map[string]Post{}, nil
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if tip == p.tip {
		defer p.mu.Unlock()
		return p.byID, nil
	}
	p.mu.Unlock()
	snap, err := p.repo.SnapshotAt(tip)
	if err != nil {
		return nil, err
	}
	byID := map[string]Post{}
	err = snap.Walk("slack", func(file string, blob gitrepo.Hash) error {
		data, err := p.repo.ReadBlob(blob)
		if err != nil {
			return err
		}
		var post Post
		if err := yaml.Unmarshal(data, &post); err != nil {
			// One unreadable record must not hide the others; the next
			// post of that proposal rewrites it.
			p.log.Warn("unreadable slack post record; ignored", "path", file, "err", err)
			return nil
		}
		byID[strings.TrimSuffix(path.Base(file), ".yaml")] = post
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.tip, p.byID = tip, byID
	p.mu.Unlock()
	return byID, nil
}

// Set records where and whether a proposal was posted. The proposal
// itself is not touched and its revision stays: recording a post
// changes nothing a reviewer decides on, and must not make the posted
// buttons stale.
func (p *Posts) Set(ctx context.Context, id string, post Post) error {
	if _, err := p.proposals.Get(ctx, id); err != nil {
		return err
	}
	if post.UpdatedAt.IsZero() {
		post.UpdatedAt = p.now().UTC().Truncate(time.Second)
	}
	data, err := yaml.Marshal(post)
	if err != nil {
		return fmt.Errorf("record slack post: %w", err)
	}
	_, err = p.w.Update(ctx, PostBranch, func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{
			Message:  fmt.Sprintf("Record the Slack post of %s", id),
			Trailers: []gitrepo.Trailer{{Key: "Slack-Post", Value: id}},
			Changes:  []gitrepo.Change{{Path: postPath(id), Data: data}},
		}, nil
	})
	return err
}
