package slackapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/lib/text"
)

// Merge suggestions in Slack (docs/lessons.md, "Curator corrections"):
// when two clusters of one agent read like one problem, precept posts
// them side by side with Merge and Keep apart buttons. Either answer is a
// curator correction recorded in the feedback repository like one made
// over the API, so a declined pair is never suggested again and a merged
// one survives every later round.

// Curation is the evaluator's judgment as curators correct it;
// internal/app adapts the evaluator and the feedback store.
type Curation interface {
	SuggestMerges(ctx context.Context, limit int) ([]evaluator.Suggestion, error)
	Cluster(ctx context.Context, id string) (evaluator.ClusterView, error)
	// Correct checks a correction and records it, as CorrectClusters
	// does over the API.
	Correct(ctx context.Context, c evaluator.Correction) (evaluator.Correction, error)
}

// The two actions of a merge suggestion's buttons.
const (
	ActionMerge     = "merge_clusters"
	ActionKeepApart = "keep_apart"
)

const blockSuggestion = "precept_suggestion"

// Defaults of the suggestion scan.
const (
	DefaultSuggestEvery = time.Hour
	DefaultSuggestMax   = 3
	// suggestedTTL is how long a posted suggestion is remembered, so the
	// same pair is not posted twice while nobody answers it.
	suggestedTTL = 30 * 24 * time.Hour
)

// SuggestionValue is what a suggestion's button carries: the two
// clusters as they were posted, and the action.
type SuggestionValue struct {
	A      string `json:"a"`
	B      string `json:"b"`
	Action string `json:"action"`
}

var clusterIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

func (v SuggestionValue) validate() error {
	switch {
	case !clusterIDPattern.MatchString(v.A) || !clusterIDPattern.MatchString(v.B) || v.A == v.B:
		return fmt.Errorf("suggestion value: %q and %q are not two cluster ids", text.Fit(v.A, 64), text.Fit(v.B, 64))
	case v.Action != ActionMerge && v.Action != ActionKeepApart:
		return fmt.Errorf("suggestion value: unknown action %q", text.Fit(v.Action, 32))
	}
	return nil
}

// Encode returns the button's value.
func (v SuggestionValue) Encode() (string, error) {
	if err := v.validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// DecodeSuggestionValue parses and checks a suggestion button's value.
func DecodeSuggestionValue(s string) (SuggestionValue, error) {
	var v SuggestionValue
	if len(s) > maxButtonValue {
		return SuggestionValue{}, fmt.Errorf("decode suggestion value: longer than %d bytes", maxButtonValue)
	}
	if err := strictJSON([]byte(s), &v); err != nil {
		return SuggestionValue{}, fmt.Errorf("decode suggestion value: %w", err)
	}
	return v, v.validate()
}

// SetCuration lets the app answer merge suggestions, and post them while
// Posting is on and SuggestEvery is not negative: before Run, with the
// evaluator's curation.
func (s *Service) SetCuration(c Curation) { s.curation = c }

// runSuggester posts new merge suggestions every SuggestEvery.
func (s *Service) runSuggester(ctx context.Context) {
	if s.curation == nil || s.opts.SuggestEvery < 0 {
		return
	}
	// The first scan waits a little, so a starting service does not post
	// before its evaluator has caught up.
	wait := min(s.opts.SuggestEvery, time.Minute)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = s.opts.SuggestEvery
		if s.Features().Posting {
			s.suggest(ctx)
		}
	}
}

// suggest posts up to SuggestMax suggestions not posted before.
func (s *Service) suggest(ctx context.Context) int {
	sgs, err := s.curation.SuggestMerges(ctx, 50)
	if err != nil {
		s.log.Warn("list merge suggestions", "err", err)
		return 0
	}
	posted := 0
	for _, sg := range sgs {
		if posted == s.opts.SuggestMax || ctx.Err() != nil {
			break
		}
		key := "suggested:" + sg.A + ":" + sg.B
		claimed, err := s.store.Claim(ctx, key, suggestedTTL)
		if err != nil {
			s.log.Warn("claim a merge suggestion", "a", sg.A, "b", sg.B, "err", err)
			return posted
		}
		if !claimed {
			continue
		}
		if err := s.postSuggestion(ctx, sg); err != nil {
			s.log.Warn("post a merge suggestion", "a", sg.A, "b", sg.B, "err", errText(err))
			if rerr := s.store.Release(ctx, key); rerr != nil {
				s.log.Warn("release a merge suggestion", "a", sg.A, "b", sg.B, "err", rerr)
			}
			continue
		}
		posted++
	}
	return posted
}

func (s *Service) postSuggestion(ctx context.Context, sg evaluator.Suggestion) error {
	var views [2]evaluator.ClusterView
	for i, id := range []string{sg.A, sg.B} {
		v, err := s.curation.Cluster(ctx, id)
		if err != nil {
			return err
		}
		views[i] = v
	}
	blocks, fallback, err := suggestionMessage(sg, views)
	if err != nil {
		return err
	}
	_, _, err = s.api.PostMessageContext(ctx, s.opts.Channel, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(fallback, false))
	s.metrics.call("chat.postMessage", err)
	return err
}

// suggestionMessage shows the two clusters side by side — category,
// size, support and their most central comment — why they read alike,
// and the two buttons.
func suggestionMessage(sg evaluator.Suggestion, views [2]evaluator.ClusterView) ([]slack.Block, string, error) {
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(text.Fit("These two clusters read like one problem · "+sg.Agent, maxHeaderText))),
	}
	for _, v := range views {
		line := fmt.Sprintf("*Cluster* `%s` · %s · %s · %d %s, %d reviewers, %d epics",
			v.ID, escape(orDash(v.Category)), v.Class, v.Size, text.Plural(v.Size, "decision", "decisions"), len(v.Reviewers), len(v.Epics))
		if len(v.Representatives) > 0 {
			line += "\n" + quote(text.Fit(v.Representatives[0].Text, 400))
		}
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(text.Fit(line, maxSectionText)), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn(text.Fit(escape(sg.Why), maxSectionText))))
	merge, err := SuggestionValue{A: sg.A, B: sg.B, Action: ActionMerge}.Encode()
	if err != nil {
		return nil, "", err
	}
	apart, err := SuggestionValue{A: sg.A, B: sg.B, Action: ActionKeepApart}.Encode()
	if err != nil {
		return nil, "", err
	}
	blocks = append(blocks, slack.NewActionBlock(blockSuggestion,
		slack.NewButtonBlockElement(ActionMerge, merge, plain("Merge")).WithStyle(slack.StylePrimary),
		slack.NewButtonBlockElement(ActionKeepApart, apart, plain("Keep apart")),
	))
	fallback := fmt.Sprintf("Merge suggestion for %s: clusters %s and %s read like one problem", sg.Agent, sg.A, sg.B)
	return blocks, text.Fit(escape(fallback), maxFallbackText), nil
}

// serveSuggestionClick answers a Merge or Keep apart click and records
// the curator's answer after the acknowledgement.
func (s *Service) serveSuggestionClick(w http.ResponseWriter, cb slack.InteractionCallback, act *slack.BlockAction) {
	const endpoint = "interactions"
	val, err := DecodeSuggestionValue(act.Value)
	if err != nil || val.Action != act.ActionID {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "malformed button value")
		return
	}
	channel, msgTS := clickedMessage(cb)
	if !validSlackID(channel) || !validSlackID(cb.User.ID) || msgTS == "" {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "payload lacks the user, channel or message")
		return
	}
	if s.curation == nil {
		// Answers need the evaluator, which this replica does not run.
		s.ack(w, endpoint, "unavailable")
		s.async("refusal notice", func(ctx context.Context) {
			s.ephemeral(ctx, channel, cb.User.ID, "", "precept did not record your answer: this precept instance does not run the evaluator. Ask an operator to route Slack's interactions to one that does, or use `precept clusters merge` / `keep-apart`.")
		})
		return
	}
	identity, why := s.authorised(cb.User.ID, "answer", "answering merge suggestions")
	if why != "" {
		s.ack(w, endpoint, "forbidden")
		s.log.Info("Slack suggestion click refused", "slack_user", cb.User.ID, "identity", identity.Name, "role", identity.Role)
		s.async("refusal notice", func(ctx context.Context) { s.ephemeral(ctx, channel, cb.User.ID, "", why) })
		return
	}
	s.ack(w, endpoint, "ok")
	s.async("answer suggestion", func(ctx context.Context) { s.answerSuggestion(ctx, val, channel, msgTS, cb.User.ID, identity) })
}

// answerSuggestion records a merge or keep-apart correction once per
// suggestion, and replaces the buttons with who answered how.
func (s *Service) answerSuggestion(ctx context.Context, v SuggestionValue, channel, msgTS, user string, identity precept.Identity) {
	key := "suggestion-answered:" + v.A + ":" + v.B
	claimed, err := s.store.Claim(ctx, key, suggestedTTL)
	if err != nil {
		s.ephemeral(ctx, channel, user, "", "precept could not record your answer: "+escape(err.Error())+".")
		return
	}
	if !claimed {
		s.ephemeral(ctx, channel, user, "", "Someone already answered this suggestion.")
		return
	}
	c := evaluator.Correction{Kind: evaluator.CorrectMerge, Clusters: []string{v.A, v.B}, By: identity.Name, Why: "Merge suggested by precept; merged in Slack"}
	done := "Merged"
	if v.Action == ActionKeepApart {
		c.Kind, c.Why, done = evaluator.CorrectKeepApart, "Merge suggested by precept; kept apart in Slack", "Kept apart"
	}
	rec, err := s.curation.Correct(ctx, c)
	if err != nil {
		if rerr := s.store.Release(ctx, key); rerr != nil {
			s.log.Warn("release a suggestion answer", "err", rerr)
		}
		s.log.Info("Slack suggestion answer refused", "a", v.A, "b", v.B, "by", identity.Name, "why", precept.ErrorMessage(err))
		s.ephemeral(ctx, channel, user, "", fmt.Sprintf("precept did not record your answer: %s.", escape(precept.ErrorMessage(err))))
		return
	}
	s.log.Info("Slack suggestion answered", "a", v.A, "b", v.B, "kind", c.Kind, "by", identity.Name, "correction", rec.ID)
	outcome := fmt.Sprintf("%s by %s (correction `%s`)", done, escape(identity.Name), rec.ID)
	blocks := []slack.Block{
		slack.NewSectionBlock(mrkdwn(text.Fit(fmt.Sprintf("Clusters `%s` and `%s` were suggested as one problem.", v.A, v.B), maxSectionText)), nil, nil),
		slack.NewContextBlock("", mrkdwn(outcome)),
	}
	_, _, _, err = s.api.UpdateMessageContext(ctx, channel, msgTS, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(outcome, false))
	s.metrics.call("chat.update", err)
	if err != nil {
		s.log.Warn("update a suggestion message", "channel", channel, "ts", msgTS, "err", errText(err))
	}
}

// authorised returns the identity a Slack user acts as and why they may
// not ("" when they may): like decider, for curator work, which needs
// the role CorrectClusters needs over the API.
func (s *Service) authorised(user, what, doing string) (precept.Identity, string) {
	id, mapped := s.identityOf(user)
	if !mapped {
		return precept.Identity{}, fmt.Sprintf("You are not mapped to a precept identity, so precept did not record your %s. Ask an operator to add your Slack user to `slack.users`.", what)
	}
	if id.Allows(DecisionRole) {
		return id, ""
	}
	return id, fmt.Sprintf("Your Slack user is mapped to the precept identity %s, whose role does not allow %s (it needs the %s role, as over the API). precept did not record your %s.",
		escape(id.Name), doing, DecisionRole, what)
}
