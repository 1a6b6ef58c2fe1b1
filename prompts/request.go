package prompts

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/precept-dev/precept"
)

const (
	// maxNameLen bounds agent and stage names.
	maxNameLen = 128
	// maxScopeLen matches the decision event's scope_path bound.
	maxScopeLen = 1024
	// MaxBasePromptBytes bounds a base prompt sent with a request.
	MaxBasePromptBytes = 1 << 20
)

// Request names the prompt an agent asks for.
type Request struct {
	// Agent is the agent whose learned rules apply.
	Agent string
	// Stage selects the base prompt prompts/<stage>.md.
	Stage string
	// ScopePath is the repository-relative path of the artifact the agent
	// works on. Its directory selects the _rules.md files: "src/api/x.go"
	// and "src/api/" both mean the directory src/api; "" means the root.
	ScopePath string
	// BasePrompt, when not nil, replaces prompts/<stage>.md.
	BasePrompt *string
}

// Validate checks the request and returns a precept.Invalid error naming
// the offending field.
func (r Request) Validate() error {
	if err := checkName("agent", r.Agent); err != nil {
		return err
	}
	if err := checkName("stage", r.Stage); err != nil {
		return err
	}
	// An empty scope is the root; CleanRelativePath would call it unclean.
	if r.ScopePath != "" && !fastCleanPath(r.ScopePath) {
		if err := precept.CleanRelativePath("scope_path", r.ScopePath); err != nil {
			return err
		}
	}
	if r.BasePrompt != nil && len(*r.BasePrompt) > MaxBasePromptBytes {
		return precept.Errorf(precept.Invalid, "base_prompt: %d bytes is more than the maximum of %d", len(*r.BasePrompt), MaxBasePromptBytes)
	}
	return nil
}

// checkName accepts safe names: letters, digits, '.', '_' and '-',
// starting with a letter or digit (so "..", ".git" and "_rules" are out).
func checkName(field, s string) error {
	switch {
	case s == "":
		return precept.Errorf(precept.Invalid, "%s: required", field)
	case len(s) > maxNameLen:
		return precept.Errorf(precept.Invalid, "%s: longer than %d bytes", field, maxNameLen)
	case !safeName(s):
		return precept.Errorf(precept.Invalid, "%s: %q may only hold letters, digits, '.', '_' and '-', and must start with a letter or digit", field, s)
	}
	return nil
}

func safeName(s string) bool {
	if s == "" || len(s) > maxNameLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// fastCleanPath reports, without allocating, that p certainly passes
// precept.CleanRelativePath. It may be stricter than that check, never
// looser: a false answer sends the request to the full check, which
// words the error.
func fastCleanPath(p string) bool {
	if len(p) > maxScopeLen || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00\\") || !utf8.ValidString(p) {
		return false
	}
	// path.Clean returns its argument without allocating when it is
	// already clean.
	if p == "" || path.Clean(p) != strings.TrimSuffix(p, "/") {
		return false
	}
	for rest := p; rest != ""; {
		seg := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if seg == ".." {
			return false
		}
	}
	return true
}

// scopeDir returns the directory a valid scope path selects, "" for the
// root, without allocating.
func scopeDir(p string) string {
	if strings.HasSuffix(p, "/") {
		p = p[:len(p)-1]
	} else if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[:i]
	} else {
		p = ""
	}
	if p == "." {
		return ""
	}
	return p
}

// rulesFileDirs returns the directories whose _rules.md apply to dir,
// outermost first: "", then each prefix of dir.
func rulesFileDirs(dir string) []string {
	out := []string{""}
	for i := 0; i < len(dir); i++ {
		if dir[i] == '/' {
			out = append(out, dir[:i])
		}
	}
	if dir != "" {
		out = append(out, dir)
	}
	return out
}

// rulesFilePath is where the _rules.md of a directory lives.
func rulesFilePath(dir string) string {
	if dir == "" {
		return promptsDir + "/" + rulesFileName
	}
	return promptsDir + "/" + dir + "/" + rulesFileName
}

// stagePath is where the base prompt of a stage lives.
func stagePath(stage string) string { return fmt.Sprintf("%s/%s.md", promptsDir, stage) }
