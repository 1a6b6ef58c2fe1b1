package prompts

import (
	"context"
	"path"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
)

// FuzzScopePath feeds arbitrary scope paths to request validation and to
// assembly: nothing panics, the fast check is never looser than
// precept.CleanRelativePath, and every _rules.md a valid scope selects is
// a clean path under prompts/ (no "..", absolute path, NUL or backslash
// leads out of it).
func FuzzScopePath(f *testing.F) {
	for _, s := range []string{
		"", ".", "./", "a", "a/", "src/api/handler.go", "..", "../etc/passwd", "a/../../b", "/etc/passwd", "//x",
		"a\x00b", "a\\..\\b", "\xff", "a/./b", "a//b", "...", "a/.../b", ".git/config", "src/\x1b[2J/x.go",
		strings.Repeat("a/", 600),
	} {
		f.Add(s)
	}
	repo := openRepo(f)
	commit(f, repo, "layout", files{
		"prompts/implement.md":      "Base.",
		"prompts/_rules.md":         "Root.",
		"prompts/src/_rules.md":     "Src.",
		"prompts/src/api/_rules.md": "API.",
	})
	a := newAssembler(f, repo, Options{CacheSize: 64})
	f.Fuzz(func(t *testing.T, p string) {
		full := p == "" || precept.CleanRelativePath("scope_path", p) == nil
		if fastCleanPath(p) && !full {
			t.Fatalf("fastCleanPath(%q) accepts what CleanRelativePath refuses", p)
		}
		req := Request{Agent: "coding-agent", Stage: "implement", ScopePath: p}
		if err := req.Validate(); err != nil {
			if full {
				t.Fatalf("Validate refuses the clean path %q: %v", p, err)
			}
			if _, err := a.Build(context.Background(), req); precept.ErrorCode(err) != precept.Invalid {
				t.Fatalf("Build(%q) = %v, want invalid", p, err)
			}
			return
		}
		dir := scopeDir(p)
		for _, d := range rulesFileDirs(dir) {
			within(t, p, rulesFilePath(d))
		}
		prompt, err := a.Build(context.Background(), req)
		if err != nil {
			t.Fatalf("Build(%q): %v", p, err)
		}
		for _, s := range prompt.Sources {
			if s.Kind == SourceRulesFile {
				within(t, p, s.Ref)
			}
		}
		if _, err := a.Explain(context.Background(), req); err != nil {
			t.Fatalf("Explain(%q): %v", p, err)
		}
	})
}

// within fails unless file is a clean relative path under prompts/.
func within(t *testing.T, scope, file string) {
	t.Helper()
	if !strings.HasPrefix(file, promptsDir+"/") || path.Clean(file) != file || strings.ContainsAny(file, "\x00\\") {
		t.Fatalf("scope %q selects %q, outside %s/", scope, file, promptsDir)
	}
	for _, seg := range strings.Split(file, "/") {
		if seg == ".." || seg == "." || seg == "" {
			t.Fatalf("scope %q selects %q, with a %q segment", scope, file, seg)
		}
	}
}
