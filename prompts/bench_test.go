package prompts

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/precept-dev/precept/rules/rulefmt"
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
		specs = append(specs, ruleSpec{id: fmt.Sprintf("r-%02d", i), importance: rulefmt.Importance([]string{"NORMAL", "IMPORTANT", "CRITICAL"}[i%3]),
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

// bench200 commits a repository of 200 active rules over ten agents, then
// a second commit that changes one rule, and returns an assembler on the
// second and the first commit's hash.
func bench200(b *testing.B) (*Assembler, string) {
	repo := openRepo(b)
	fs := benchFiles(b)
	for i := range 180 {
		agent := fmt.Sprintf("agent-%d", i%9)
		fs = merge(fs, ruleFiles(b, agent, ruleSpec{id: fmt.Sprintf("r-x%03d", i), confidence: 0.7,
			content: "When a retry loop gives up, return the last error wrapped with the attempt count so callers can tell a timeout from a refusal."}))
	}
	first := commit(b, repo, "bench", fs)
	commit(b, repo, "one rule", ruleFiles(b, "coding-agent", ruleSpec{id: "r-05", content: "Changed."}))
	return newAssembler(b, repo, Options{}), first.String()
}

// BenchmarkBuildAtPreviousCommit is the prompt explorer's diff: a version
// one commit old, with the blobs of the current commit known.
func BenchmarkBuildAtPreviousCommit(b *testing.B) {
	a, first := bench200(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.BuildAt(ctx, implement, first); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildAtNothingShared is the worst case: every file of the old
// commit is read and parsed again.
func BenchmarkBuildAtNothingShared(b *testing.B) {
	a, first := bench200(b)
	a.refreshMu.Lock()
	a.loader.blobs = map[blobKey]parsed{}
	a.refreshMu.Unlock()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.BuildAt(ctx, implement, first); err != nil {
			b.Fatal(err)
		}
	}
}
