package instructions

import (
	"fmt"
	"regexp"
	"strings"
)

// Format is one kind of instruction file.
type Format string

// The instruction-file formats precept writes.
const (
	// AgentsMD is AGENTS.md at the repository root.
	AgentsMD Format = "agents"
	// ClaudeMD is CLAUDE.md at the repository root.
	ClaudeMD Format = "claude"
	// Copilot is .github/copilot-instructions.md.
	Copilot Format = "copilot"
	// Cursor is a Cursor project rule, .cursor/rules/precept-<agent>.mdc.
	Cursor Format = "cursor"
)

// AllFormats are the formats a sync writes by default, in the order files
// are reported.
func AllFormats() []Format { return []Format{AgentsMD, ClaudeMD, Copilot, Cursor} }

// Path is the repository-relative path of the format's file for agent.
func (f Format) Path(agent string) string {
	switch f {
	case AgentsMD:
		return "AGENTS.md"
	case ClaudeMD:
		return "CLAUDE.md"
	case Copilot:
		return ".github/copilot-instructions.md"
	case Cursor:
		return ".cursor/rules/precept-" + agent + ".mdc"
	}
	return ""
}

// ParseFormats reads a comma-separated list of format names; empty means
// AllFormats. Duplicates are dropped.
func ParseFormats(s string) ([]Format, error) {
	if strings.TrimSpace(s) == "" {
		return AllFormats(), nil
	}
	var out []Format
	seen := map[Format]bool{}
	for _, name := range strings.Split(s, ",") {
		f := Format(strings.ToLower(strings.TrimSpace(name)))
		if f.Path("a") == "" {
			return nil, fmt.Errorf("%w: unknown format %q (want agents, claude, copilot or cursor)", ErrInvalid, name)
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// namePattern is what agent and stage names may hold: precept's agent
// names, which are also safe in a marker, a file name and a branch name.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidName reports whether an agent or stage name can be written in a
// marker, a file name and a branch name.
func ValidName(v string) bool {
	return namePattern.MatchString(v) && !strings.Contains(v, "..") && !strings.HasSuffix(v, ".") && !strings.HasSuffix(v, ".lock")
}

func checkName(field, v string) error {
	if !ValidName(v) {
		return fmt.Errorf("%w: %s %q: want letters, digits, '.', '_' or '-'", ErrInvalid, field, v)
	}
	return nil
}

// versionPattern is what a prompt version may hold in a marker.
var versionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._-]{0,127}$`)

// globSafe is a path that can stand in a Cursor glob as it is; any other
// path makes the rule apply always.
var globSafe = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// cursorHeader is the front matter of a new .mdc file. Cursor reads
// description, globs and alwaysApply; the header sits outside the markers,
// so an edit to it (narrower globs, say) is kept by later syncs.
func cursorHeader(b Block, nl string) string {
	globs, always := "", "true"
	if p := strings.Trim(b.Path, "/"); p != "" && globSafe.MatchString(p) && !strings.Contains(p, "..") {
		globs, always = p+"/**", "false"
	}
	return "---" + nl +
		fmt.Sprintf("description: Rules approved in precept for agent %s, stage %s", b.Agent, b.Stage) + nl +
		"globs: " + globs + nl +
		"alwaysApply: " + always + nl +
		"---" + nl
}
