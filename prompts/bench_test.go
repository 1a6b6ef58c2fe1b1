package prompts

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/precept-dev/precept/rules"
)

// benchFiles is the benchmark's repository: a base prompt, _rules.md on
// three levels and 20 active rules of typical length for one agent.
func benchFiles(b *testing.B) files {
	fs := files{
		"prompts/implement.md":      strings.Repeat("You are the implementation agent. Follow the task description precisely.\n", 20),
		"prompts/_rules.md":         strings.Repeat("Keep functions short and name them for what they do.\n", 5),
		"prompts/src/_rules.md":     strings.Repeat("Every package has a doc comment.\n", 5),
		"prompts/src/api/_rules.md": strings.Repeat("Handlers validate input before touching storage.\n", 5),
	}
	var specs []ruleSpec
	for i := range 20 {
		specs = append(specs, ruleSpec{id: fmt.Sprintf("r-%02d", i), importance: rules.Importance([]string{"NORMAL", "IMPORTANT", "CRITICAL"}[i%3]),
			confidence: 0.5 + float64(i)/100, content: "When a retry loop gives up, return the last error wrapped with the attempt count so callers can tell a timeout from a refusal."})
	}
	return merge(fs, ruleFiles(b, "coding-agent", specs...))
}

func BenchmarkBuildCached(b *testing.B) {
	repo := openRepo(b)
	commit(b, repo, "bench", benchFiles(b))
	a := newAssembler(b, repo, Options{})
	ctx := context.Background()
	build(b, a, implement)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Build(ctx, implement); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAssemble(b *testing.B) {
	repo := openRepo(b)
	commit(b, repo, "bench", benchFiles(b))
	a := newAssembler(b, repo, Options{})
	ix := a.state.Load()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ix.assemble(implement, "src/api", 20); err != nil {
			b.Fatal(err)
		}
	}
}
