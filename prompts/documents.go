package prompts

import (
	"slices"
	"strings"
)

// The kinds of Document.
const (
	DocumentBasePrompt = "base_prompt"
	DocumentRulesFile  = "rules_file"
	DocumentRule       = "rule"
)

// Document is one piece of guidance on main that prompts are built from:
// a base prompt, a _rules.md file, or an active or shadow rule. Files
// that cannot be used (too large, unparsable, failing the text checks)
// are left out, as they are left out of prompts.
type Document struct {
	// Kind is DocumentBasePrompt, DocumentRulesFile or DocumentRule.
	Kind string
	// Path is the file on main.
	Path string
	// Agent and RuleID name a rule; Agent is the directory it is in.
	Agent, RuleID string
	Text          string
}

// Documents returns the guidance on the commit of main prompts are built
// from now, and that commit, in a stable order: base prompts, then
// _rules.md files, then rules, each by path.
func (a *Assembler) Documents() (commit string, docs []Document) {
	ix := a.state.Load()
	for _, d := range ix.stages {
		if d.problem == "" && strings.TrimSpace(d.text) != "" {
			docs = append(docs, Document{Kind: DocumentBasePrompt, Path: d.path, Text: d.text})
		}
	}
	for _, d := range ix.dirs {
		if d.problem == "" && strings.TrimSpace(d.text) != "" {
			docs = append(docs, Document{Kind: DocumentRulesFile, Path: d.path, Text: d.text})
		}
	}
	for agent, ar := range ix.agents {
		for _, r := range slices.Concat(ar.active, ar.shadow) {
			if r.problem == "" && !r.unsafe {
				docs = append(docs, Document{Kind: DocumentRule, Path: r.path, Agent: agent, RuleID: r.ID, Text: r.Content})
			}
		}
	}
	order := map[string]int{DocumentBasePrompt: 0, DocumentRulesFile: 1, DocumentRule: 2}
	slices.SortFunc(docs, func(x, y Document) int {
		if d := order[x.Kind] - order[y.Kind]; d != 0 {
			return d
		}
		return strings.Compare(x.Path, y.Path)
	})
	return ix.commit.String(), docs
}
