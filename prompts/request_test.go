package prompts

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
)

func TestRulesFilesApplyFromTheRootDownToTheScopeDirectory(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "layout", files{
		"prompts/implement.md":         "Implement the task.",
		"prompts/_rules.md":            "Root rules.",
		"prompts/src/_rules.md":        "Source rules.",
		"prompts/src/api/_rules.md":    "API rules.",
		"prompts/src/api/v2/_rules.md": "API v2 rules.",
		"prompts/src/web/_rules.md":    "Web rules.",
		"prompts/docs/_rules.md":       "\n\n",
	})
	a := newAssembler(t, repo, Options{})
	tests := []struct {
		name  string
		scope string
		want  []string
	}{
		{"empty scope is the root only", "", []string{"prompts/_rules.md"}},
		{"file at the root", "main.go", []string{"prompts/_rules.md"}},
		{"dot is the root", ".", []string{"prompts/_rules.md"}},
		{"nested file, outermost first", "src/api/handler.go", []string{"prompts/_rules.md", "prompts/src/_rules.md", "prompts/src/api/_rules.md"}},
		{"deepest level", "src/api/v2/routes.go", []string{"prompts/_rules.md", "prompts/src/_rules.md", "prompts/src/api/_rules.md", "prompts/src/api/v2/_rules.md"}},
		{"directory with trailing slash", "src/api/", []string{"prompts/_rules.md", "prompts/src/_rules.md", "prompts/src/api/_rules.md"}},
		{"without the slash the last element is a file", "src/api", []string{"prompts/_rules.md", "prompts/src/_rules.md"}},
		{"sibling directory does not see api", "src/web/app.ts", []string{"prompts/_rules.md", "prompts/src/_rules.md", "prompts/src/web/_rules.md"}},
		{"directory missing in between", "src/lib/deep/x.go", []string{"prompts/_rules.md", "prompts/src/_rules.md"}},
		{"path outside the tree", "vendor/pkg/x.go", []string{"prompts/_rules.md"}},
		{"empty _rules.md adds nothing", "docs/guide.md", []string{"prompts/_rules.md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, a, Request{Agent: "coding-agent", Stage: "implement", ScopePath: tt.scope})
			var got []string
			for _, s := range p.Sources {
				if s.Kind == SourceRulesFile {
					got = append(got, s.Ref)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("rules files = %q, want %q", got, tt.want)
			}
			last := -1
			for _, ref := range got {
				i := strings.Index(p.Text, "## Directory Rules ("+ref+")")
				if i <= last {
					t.Fatalf("%s is missing or out of order in:\n%s", ref, p.Text)
				}
				last = i
			}
			if strings.Count(p.Text, "## Directory Rules") != len(tt.want) {
				t.Fatalf("unexpected sections in:\n%s", p.Text)
			}
		})
	}
}

func TestInvalidRequestsAreRejectedAsInvalidArgument(t *testing.T) {
	a := newAssembler(t, openRepo(t), Options{})
	big := strings.Repeat("x", MaxBasePromptBytes+1)
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"dot-dot", Request{Agent: "a", Stage: "s", ScopePath: ".."}, "scope_path: must not contain .."},
		{"dot-dot prefix", Request{Agent: "a", Stage: "s", ScopePath: "../etc/passwd"}, "scope_path: must not contain .."},
		{"dot-dot inside", Request{Agent: "a", Stage: "s", ScopePath: "src/../../x"}, "scope_path: must not contain .."},
		{"dot-dot last", Request{Agent: "a", Stage: "s", ScopePath: "src/.."}, "scope_path: must not contain .."},
		{"absolute", Request{Agent: "a", Stage: "s", ScopePath: "/etc/passwd"}, "scope_path: must be relative"},
		{"backslash", Request{Agent: "a", Stage: "s", ScopePath: `src\api\x.go`}, "scope_path: contains a NUL byte or a backslash"},
		{"NUL", Request{Agent: "a", Stage: "s", ScopePath: "src/x\x00.go"}, "scope_path: contains a NUL byte"},
		{"not clean", Request{Agent: "a", Stage: "s", ScopePath: "src//x.go"}, "scope_path: must be a clean path"},
		{"dot segment", Request{Agent: "a", Stage: "s", ScopePath: "src/./x.go"}, "scope_path: must be a clean path"},
		{"not UTF-8", Request{Agent: "a", Stage: "s", ScopePath: "src/\xff.go"}, "scope_path: not valid UTF-8"},
		{"too long", Request{Agent: "a", Stage: "s", ScopePath: strings.Repeat("a/", 600)}, "scope_path: longer than"},
		{"no agent", Request{Stage: "s"}, "agent: required"},
		{"agent with slash", Request{Agent: "a/b", Stage: "s"}, "agent: \"a/b\" may only hold"},
		{"agent dot-dot", Request{Agent: "..", Stage: "s"}, "agent: \"..\" may only hold"},
		{"no stage", Request{Agent: "a"}, "stage: required"},
		{"stage naming the root rules file", Request{Agent: "a", Stage: "_rules"}, "stage: \"_rules\" may only hold"},
		{"stage with space", Request{Agent: "a", Stage: "impl ement"}, "stage: "},
		{"stage too long", Request{Agent: "a", Stage: strings.Repeat("s", maxNameLen+1)}, "stage: longer than"},
		{"base prompt too large", Request{Agent: "a", Stage: "s", BasePrompt: &big}, "base_prompt: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, call := range []func() error{
				func() error { _, err := a.Build(context.Background(), tt.req); return err },
				func() error { _, err := a.Explain(context.Background(), tt.req); return err },
				func() error {
					return a.Watch(context.Background(), tt.req, "", func(Update) error { t.Fatal("sent an update"); return nil })
				},
			} {
				err := call()
				if precept.ErrorCode(err) != precept.Invalid || !strings.Contains(precept.ErrorMessage(err), tt.want) {
					t.Fatalf("error = %v (code %s), want Invalid containing %q", err, precept.ErrorCode(err), tt.want)
				}
			}
		})
	}
}

func TestFastPathCheckAgreesWithCleanRelativePath(t *testing.T) {
	paths := []string{"", ".", "./", "a", "a/", "a/b", "a/b/", "a/b.go", "a//b", "a/./b", "./a", "a/.", "..", "../a", "a/..",
		"a/../b", "/a", "a\\b", "a\x00", "\xff", "a/b/../c/", "...", "a/.../b", ".hidden/x", "a/..b", strings.Repeat("x", 1024), strings.Repeat("x", 1025)}
	for _, p := range paths {
		fast := fastCleanPath(p)
		full := precept.CleanRelativePath("scope_path", p) == nil
		if fast != full {
			t.Errorf("path %q: fast check %v, CleanRelativePath %v", p, fast, full)
		}
	}
}

func TestValidatingAndScopingAllocateNothing(t *testing.T) {
	req := Request{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/v2/handler.go"}
	allocs := testing.AllocsPerRun(100, func() {
		if err := req.Validate(); err != nil {
			t.Fatal(err)
		}
		if scopeDir(req.ScopePath) != "src/api/v2" {
			t.Fatal("wrong directory")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request", allocs)
	}
}
