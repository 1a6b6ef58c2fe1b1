package api

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

func TestPromptVersionsAreListedAndRebuiltThroughTheAPI(t *testing.T) {
	s := startPromptServer(t)
	ctx := context.Background()
	c := promptClient(s.url, "connect", readerToken)
	built, err := c.BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/main.go"}))
	if err != nil {
		t.Fatal(err)
	}
	base := "My own instructions."
	own, err := c.BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", BasePrompt: &base}))
	if err != nil {
		t.Fatal(err)
	}

	targets, err := c.ListPromptTargets(ctx, connect.NewRequest(&preceptv1.ListPromptTargetsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(targets.Msg.GetAgents(), []string{"coding-agent"}) || !slices.Equal(targets.Msg.GetStages(), []string{"implement"}) {
		t.Fatalf("targets: agents %q stages %q", targets.Msg.GetAgents(), targets.Msg.GetStages())
	}

	// Each build recorded a prompt and its shadow prompt.
	list, err := c.ListPromptVersions(ctx, connect.NewRequest(&preceptv1.ListPromptVersionsRequest{Agent: "coding-agent", Stage: "implement"}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range list.Msg.GetVersions() {
		got = append(got, v.GetVersion())
	}
	if list.Msg.GetTotal() != 4 || len(got) != 4 || !slices.Contains(got, built.Msg.GetVersion()) || !slices.Contains(got, built.Msg.GetShadowVersion()) {
		t.Fatalf("versions %q (total %d), want the 4 recorded", got, list.Msg.GetTotal())
	}
	page, err := c.ListPromptVersions(ctx, connect.NewRequest(&preceptv1.ListPromptVersionsRequest{Agent: "coding-agent", Stage: "implement", Offset: 3, Limit: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Msg.GetVersions()) != 1 || page.Msg.GetVersions()[0].GetVersion() != got[3] || page.Msg.GetTotal() != 4 {
		t.Fatalf("the page from offset 3: %v", page.Msg)
	}

	v, err := c.GetPromptVersion(ctx, connect.NewRequest(&preceptv1.GetPromptVersionRequest{Version: built.Msg.GetVersion(), WithText: true}))
	if err != nil {
		t.Fatal(err)
	}
	if v.Msg.GetText() != built.Msg.GetPrompt() || v.Msg.GetVersion().GetScopeDir() != "src" || !slices.Equal(v.Msg.GetVersion().GetRuleIds(), built.Msg.GetRuleIds()) {
		t.Fatalf("version %v, text %q", v.Msg.GetVersion(), v.Msg.GetText())
	}
	// A client's own base prompt is recorded by digest only.
	v, err = c.GetPromptVersion(ctx, connect.NewRequest(&preceptv1.GetPromptVersionRequest{Version: own.Msg.GetVersion(), WithText: true}))
	if err != nil {
		t.Fatal(err)
	}
	if v.Msg.GetText() != "" || !strings.Contains(v.Msg.GetTextUnavailable(), "base prompt sent by the client") {
		t.Fatalf("a version with the client's base prompt: text %q, unavailable %q", v.Msg.GetText(), v.Msg.GetTextUnavailable())
	}

	for _, tc := range []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"unknown version", func() error {
			_, err := c.GetPromptVersion(ctx, connect.NewRequest(&preceptv1.GetPromptVersionRequest{Version: "v1:0000000000000000"}))
			return err
		}, connect.CodeNotFound},
		{"no stage", func() error {
			_, err := c.ListPromptVersions(ctx, connect.NewRequest(&preceptv1.ListPromptVersionsRequest{Agent: "coding-agent"}))
			return err
		}, connect.CodeInvalidArgument},
		{"no token", func() error {
			_, err := promptClient(s.url, "connect", "").ListPromptTargets(ctx, connect.NewRequest(&preceptv1.ListPromptTargetsRequest{}))
			return err
		}, connect.CodeUnauthenticated},
	} {
		if err := tc.call(); connect.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}

func TestPromptVersionsAreAFailedPreconditionWhereNoneAreRecorded(t *testing.T) {
	s := startPromptServer(t)
	svc := &PromptService{Prompts: s.assembler, Log: slog.New(slog.DiscardHandler)}
	_, err := svc.ListPromptVersions(context.Background(), connect.NewRequest(&preceptv1.ListPromptVersionsRequest{Agent: "coding-agent", Stage: "implement"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "effects.enabled is off") {
		t.Fatalf("ListPromptVersions = %v", err)
	}
	_, err = svc.GetPromptVersion(context.Background(), connect.NewRequest(&preceptv1.GetPromptVersionRequest{Version: "v1:0000000000000000"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("GetPromptVersion = %v", err)
	}
}
