package rules

import (
	"context"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gitrepo"
)

// SlackBranch holds where proposals were posted (slack/<id>.yaml). It is
// kept apart from proposal branches and main: recording a post must not
// change a rule PR, nor fill main's audit log with bookkeeping.
const SlackBranch = "precept/slack"

func slackPath(id string) string { return "slack/" + id + ".yaml" }

// SetSlackPost records where and whether a proposal was posted to Slack,
// so that a restarted server updates the same message. It is kept on
// SlackBranch, not on the proposal's branch, and does not change the
// proposal's Revision: recording a post changes nothing a reviewer
// decides on, and must not make the posted buttons stale.
func (m *Manager) SetSlackPost(ctx context.Context, id string, post SlackPost) error {
	if err := checkProposalID(id); err != nil {
		return err
	}
	st, err := m.store.State(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := st.proposal(id); !ok {
		return precept.Errorf(precept.NotFound, "proposal %s not found", id)
	}
	if post.UpdatedAt.IsZero() {
		post.UpdatedAt = m.now()
	}
	data, err := yaml.Marshal(post)
	if err != nil {
		return fmt.Errorf("record slack post: %w", err)
	}
	_, err = m.store.Commit(ctx, SlackBranch, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{
			Message:  fmt.Sprintf("Record the Slack post of %s", id),
			Trailers: []gitrepo.Trailer{{Key: "Slack-Post", Value: id}},
			Changes:  []gitrepo.Change{{Path: slackPath(id), Data: data}},
		}, nil
	})
	return err
}
