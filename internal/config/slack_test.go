package config

import (
	"strings"
	"testing"
	"time"
)

const slackBase = "slack: {bot_token: xoxb-1, signing_secret: s3cret, channel: C0RULES"

func TestSlackSettingsAreValidatedByKey(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{slackBase + ", api_url: 'slack.example'}", "slack.api_url"},
		{slackBase + ", users: {alice: alice}}", "slack.users"},
		{slackBase + ", users: {U0ALICE: ''}}", "slack.users.U0ALICE"},
		{slackBase + ", reviewers: {rev-ann: '@ann'}}", "slack.reviewers"},
		{slackBase + ", clarification: {max_attempts: 0}}", "slack.clarification"},
		{slackBase + ", max_skew: 0s}", "slack.max_skew"},
	} {
		_, err := Parse(tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v does not name %s", tc.yaml, err, tc.key)
		}
	}
}

func TestSlackDefaultsAndMappingsAreRead(t *testing.T) {
	cfg, err := Parse(slackBase+", api_url: 'http://127.0.0.1:9/api/', users: {U0ALICE: alice}, reviewers: {rev-ann: U0ANN}, clarification: {stale_after: 10m}}", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Slack
	if !s.Enabled() || s.Users["U0ALICE"] != "alice" || s.Reviewers["rev-ann"] != "U0ANN" || s.MaxSkew != 5*time.Minute || s.PostRetry != time.Minute {
		t.Fatalf("slack = %+v", s)
	}
	if c := s.Clarification; c.MaxAttempts != 3 || c.StaleAfter != 10*time.Minute || c.RepostGuard != 24*time.Hour || c.ScanInterval != 5*time.Minute {
		t.Fatalf("clarification = %+v", c)
	}
	if cfg.Features.Posting != true || cfg.Features.Clarification != false {
		t.Fatalf("features = posting %v, clarification %v", cfg.Features.Posting, cfg.Features.Clarification)
	}
}
