package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/precept-dev/precept/instructions"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/gitcli"
	"github.com/precept-dev/precept/prompts"
)

// runInstructions keeps each configured instruction target in step with
// its prompt (docs/instructions.md, "After every merge"): a prompt watch
// per target feeds instructions.Follow, which syncs at start and after
// every change of the prompt's version. Failures are logged and retried;
// they never stop preceptd.
func (a *App) runInstructions(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, t := range a.Config.Instructions.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.followInstructionTarget(ctx, t)
		}()
	}
	wg.Wait()
	return nil
}

func (a *App) followInstructionTarget(ctx context.Context, t config.InstructionTarget) {
	log := a.Log.With("component", "instructions", "agent", t.Agent, "stage", t.Stage, "remote", gitcli.RedactURL(t.RemoteURL))
	formats, _ := instructions.ParseFormats(strings.Join(t.Formats, ",")) // checked by config.Validate
	blocks := make(chan instructions.Block, 1)
	syncFn := func(ctx context.Context, b instructions.Block) (instructions.Result, error) {
		auth, err := instructionAuth(t)
		if err != nil {
			return instructions.Result{}, err
		}
		return instructions.SyncURL(ctx, t.RemoteURL, auth, gitcli.Options{}, instructions.Request{
			Block: b, Formats: formats, Base: t.Base, Branch: t.Branch})
	}
	report := func(b instructions.Block, res instructions.Result, err error) {
		switch {
		case err != nil:
			log.Warn("instruction sync failed; retrying", "version", b.Version, "err", err)
		case res.Reset:
			log.Info("instruction sync branch reset to the base, which holds this prompt", "version", b.Version, "branch", res.Branch, "base", res.Base)
		case res.Commit != "":
			log.Info("instruction files pushed", "version", b.Version, "branch", res.Branch, "base", res.Base, "commit", res.Commit)
		default:
			log.Debug("instruction files up to date", "version", b.Version, "branch", res.Branch)
		}
	}
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		instructions.Follow(ctx, blocks, syncFn, instructions.FollowOptions{Report: report})
	}()
	defer func() { <-followed }()

	req := prompts.Request{Agent: t.Agent, Stage: t.Stage, ScopePath: t.Path}
	var lastErr string
	for ctx.Err() == nil {
		err := a.Prompts.Watch(ctx, req, "", func(u prompts.Update) error {
			lastErr = ""
			b := instructions.Block{Agent: t.Agent, Stage: t.Stage, Path: t.Path, Version: u.Prompt.Version, Text: u.Prompt.Text}
			select { // keep only the latest block waiting
			case <-blocks:
			default:
			}
			blocks <- b
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		// The stage's base prompt may not exist yet. Building again is a
		// cache hit until main changes, so look every second; say so once.
		if err != nil && err.Error() != lastErr {
			lastErr = err.Error()
			log.Warn("cannot build the prompt to sync; waiting for the rules repository to change", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// instructionAuth reads a target's credentials, the token afresh at
// each sync so that a rotated one is used.
func instructionAuth(t config.InstructionTarget) (gitcli.Auth, error) {
	auth := gitcli.Auth{Username: t.Username, SSHKeyPath: t.SSHKey}
	switch {
	case t.TokenEnv != "":
		auth.Password = os.Getenv(t.TokenEnv)
		if auth.Password == "" {
			return auth, fmt.Errorf("instructions: %s is empty", t.TokenEnv)
		}
	case t.TokenFile != "":
		tok, err := config.ReadTokenFile(t.TokenFile)
		if err != nil {
			return auth, fmt.Errorf("instructions: %w", err)
		}
		auth.Password = tok
	}
	return auth, nil
}
