package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/instructions"
	"github.com/precept-dev/precept/lib/gitcli"
)

// Where the sync's git credentials come from (docs/instructions.md): the
// environment or a file, never a flag, so they show neither in ps nor in
// shell history.
const (
	envGitUsername     = "PRECEPT_GIT_USERNAME"
	envGitToken        = "PRECEPT_GIT_TOKEN"
	envGitTokenFile    = "PRECEPT_GIT_TOKEN_FILE"
	envGitSSHKey       = "PRECEPT_GIT_SSH_KEY"
	defaultGitUsername = "precept"
)

func instructionsCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{Use: "instructions", Short: "Write an agent's approved rules into a repository's instruction files"}
	cmd.AddCommand(instructionsSyncCmd(c))
	return cmd
}

type syncFlags struct {
	agent, stage, path string
	remote, base       string
	branch, formats    string
	tokenFile, sshKey  string
	overwrite          bool
}

func instructionsSyncCmd(c *cli) *cobra.Command {
	var f syncFlags
	cmd := &cobra.Command{
		Use:   "sync --agent A --stage S --remote URL [--base BRANCH] [--formats agents,claude,copilot,cursor]",
		Short: "Build the agent's prompt and push it, between precept's markers, to a branch of the target repository",
		Long: `Builds the prompt for the agent, stage and path (as prompt build does), writes
it between precept's markers in AGENTS.md, CLAUDE.md,
.github/copilot-instructions.md and .cursor/rules/precept-<agent>.mdc as the
base branch has them, and pushes one commit to precept/instructions/<agent>,
ready to open as a pull request. Nothing outside the markers changes; no
commit is made when nothing changed. A hand edit between the markers, or a
commit precept did not make on the sync branch, stops the sync unless
--overwrite-hand-edits is given.

Credentials for an HTTPS remote come from $` + envGitToken + ` or the file named
by --token-file ($` + envGitTokenFile + `), with the user $` + envGitUsername + `
(default ` + defaultGitUsername + `); an SSH remote uses --ssh-key ($` + envGitSSHKey + `) or
the SSH agent. Without them, git's own credential helpers answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return instructionsSync(c, cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.agent, "agent", "", "agent name (required)")
	fl.StringVar(&f.stage, "stage", "", "stage: selects prompts/<stage>.md (required)")
	fl.StringVar(&f.path, "path", "", "path the agent works on: selects the _rules.md files, and a Cursor rule's globs")
	fl.StringVar(&f.remote, "remote", "", "git URL of the target repository (required)")
	fl.StringVar(&f.base, "base", "", "branch to start from (default: the remote's default branch)")
	fl.StringVar(&f.branch, "branch", "", "branch to push (default precept/instructions/<agent>)")
	fl.StringVar(&f.formats, "formats", "agents,claude,copilot,cursor", "instruction files to write: agents, claude, copilot, cursor")
	fl.StringVar(&f.tokenFile, "token-file", os.Getenv(envGitTokenFile), "file holding the HTTPS token or password (env "+envGitTokenFile+")")
	fl.StringVar(&f.sshKey, "ssh-key", os.Getenv(envGitSSHKey), "private key for an SSH remote (env "+envGitSSHKey+")")
	fl.BoolVar(&f.overwrite, "overwrite-hand-edits", false, "replace text edited by hand between the markers, and discard commits on the sync branch that precept did not make")
	return cmd
}

func (f syncFlags) auth() (gitcli.Auth, error) {
	a := gitcli.Auth{Username: os.Getenv(envGitUsername), Password: os.Getenv(envGitToken), SSHKeyPath: f.sshKey}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return a, fmt.Errorf("read token file: %w", err)
		}
		a.Password = strings.TrimSpace(string(b))
		if a.Password == "" {
			return a, fmt.Errorf("token file %s is empty", f.tokenFile)
		}
	}
	if a.Password != "" && a.Username == "" {
		a.Username = defaultGitUsername
	}
	return a, nil
}

func instructionsSync(c *cli, cmd *cobra.Command, f syncFlags) error {
	if f.agent == "" || f.stage == "" || f.remote == "" {
		return usagef("sync needs --agent NAME, --stage STAGE and --remote URL")
	}
	formats, err := instructions.ParseFormats(f.formats)
	if err != nil {
		return usagef("--formats: %v", err)
	}
	auth, err := f.auth()
	if err != nil {
		return err
	}
	if err := gitcli.CheckURL(f.remote, auth.Password != ""); err != nil {
		return usagef("--remote: %v; credentials come from $%s or --token-file ($%s)", err, envGitToken, envGitTokenFile)
	}
	prompt, err := call(c, cmd, c.promptClient().BuildPrompt, &preceptv1.BuildPromptRequest{
		Agent: f.agent, Stage: f.stage, ScopePath: f.path})
	if err != nil {
		return err
	}
	req := instructions.Request{
		Block:     instructions.Block{Agent: f.agent, Stage: f.stage, Path: f.path, Version: prompt.Version, Text: prompt.Prompt},
		Formats:   formats,
		Base:      f.base,
		Branch:    f.branch,
		Overwrite: f.overwrite,
	}
	if err := req.Block.Validate(); err != nil {
		return usagef("%v", err)
	}
	res, err := instructions.SyncURL(cmd.Context(), f.remote, auth, gitcli.Options{}, req)
	if err != nil {
		return err
	}
	return printSync(c, res, prompt.Version)
}

func printSync(c *cli, res instructions.Result, version string) error {
	if c.output == "json" {
		b, err := json.Marshal(struct {
			instructions.Result
			Version string `json:"prompt_version"`
		}{res, version})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", b)
		return err
	}
	for _, f := range res.Files {
		what := string(f.Outcome)
		if f.Skipped != "" {
			what = "skipped: " + f.Skipped
		}
		fmt.Fprintf(c.stdout, "%-40s %s\n", f.Path, what)
	}
	switch {
	case res.Reset:
		fmt.Fprintf(c.stdout, "reset %s to %s (at %.12s): %s already holds prompt version %s, and the branch held other rules; its pull request now shows no change\n",
			res.Branch, res.Base, res.BaseCommit, res.Base, version)
	case res.Commit != "":
		fmt.Fprintf(c.stdout, "pushed %s to %s (on %s at %.12s), prompt version %s: open a pull request from %s into %s\n",
			shortHash(res.Commit), res.Branch, res.Base, res.BaseCommit, version, res.Branch, res.Base)
	default:
		fmt.Fprintf(c.stdout, "up to date: %s already holds prompt version %s; nothing committed\n", upToDateWhere(res), version)
	}
	return nil
}

func upToDateWhere(res instructions.Result) string {
	for _, f := range res.Files {
		if f.Skipped == "" && f.Outcome != instructions.Unchanged {
			return res.Branch
		}
	}
	return res.Base
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
