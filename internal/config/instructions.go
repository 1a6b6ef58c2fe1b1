package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/precept-dev/precept/instructions"
)

// Instructions configures the automatic instruction-file sync
// (docs/instructions.md, "After every merge"). Off by default: no targets.
type Instructions struct {
	// Targets are the repositories kept in step with an agent's prompt:
	// each is synced at start and after every change of that prompt.
	Targets []InstructionTarget `yaml:"targets"`
}

// InstructionTarget is one agent's prompt written into one repository.
type InstructionTarget struct {
	Agent string `yaml:"agent"`
	Stage string `yaml:"stage"`
	// Path selects the _rules.md files, as BuildPrompt's scope_path.
	Path string `yaml:"path"`
	// RemoteURL is the target repository (HTTPS, SSH or a path).
	RemoteURL string `yaml:"remote_url"`
	// Base is the branch synced from; empty: the remote's default branch.
	Base string `yaml:"base"`
	// Branch is pushed; empty: precept/instructions/<agent>.
	Branch string `yaml:"branch"`
	// Formats are agents, claude, copilot, cursor; empty: all four.
	Formats []string `yaml:"formats"`
	// Username and, from the environment variable TokenEnv or the file
	// TokenFile (read at each sync), the HTTPS token; SSHKey for SSH.
	Username  string `yaml:"username"`
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	SSHKey    string `yaml:"ssh_key"`
}

// ReadTokenFile reads a target's token from path, refusing an empty one
// (which would silently mean no credentials). The file is read again at
// each sync, so a rotated token is used.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

func (in Instructions) validate() error {
	seen := map[string]int{}
	for i, t := range in.Targets {
		key := fmt.Sprintf("instructions.targets[%d]", i)
		switch {
		case !instructions.ValidName(t.Agent):
			return invalid(key+".agent", "%q is not an agent name", t.Agent)
		case !instructions.ValidName(t.Stage):
			return invalid(key+".stage", "%q is not a stage name", t.Stage)
		case strings.TrimSpace(t.RemoteURL) == "":
			return invalid(key+".remote_url", "required")
		case t.TokenEnv != "" && t.TokenFile != "":
			return invalid(key, "set token_env or token_file, not both")
		}
		// A password in the URL would reach git's process arguments; a
		// token over plain http would cross the network in clear.
		if err := instructions.CheckRemoteURL(t.RemoteURL, t.TokenEnv != "" || t.TokenFile != ""); err != nil {
			return invalid(key+".remote_url", "%v", err)
		}
		if t.TokenFile != "" {
			if _, err := ReadTokenFile(t.TokenFile); err != nil {
				return invalid(key+".token_file", "%v", err)
			}
		}
		if _, err := instructions.ParseFormats(strings.Join(t.Formats, ",")); err != nil {
			return invalid(key+".formats", "%v", err)
		}
		branch := t.Branch
		if branch == "" {
			branch = instructions.Branch(t.Agent)
		}
		id := t.RemoteURL + " " + branch
		if j, dup := seen[id]; dup {
			return invalid(key, "pushes to the same remote and branch as instructions.targets[%d]", j)
		}
		seen[id] = i
	}
	return nil
}
