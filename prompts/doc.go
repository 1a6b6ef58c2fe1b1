// Package prompts assembles the stage prompts agents run with
// (docs/architecture.md): a base prompt, the directory-scoped _rules.md
// files on the path to the artifact, and the agent's learned rules, with
// a content-hash version.
//
// Everything comes from the main branch of the rules repository:
//
//	prompts/<stage>.md                  base stage prompts
//	prompts/**/_rules.md                directory-scoped rules
//	rules/active/<agent>/<rule_id>.md   approved rules (rulefmt.Rule files)
//
// An Assembler reads one snapshot of main into an in-memory index (rules
// by agent, _rules.md by directory, base prompts by stage) and caches the
// prompts it assembles from it, so answering a request needs no git read
// and, for a cached prompt, no allocation. When main moves (Notify after
// precept's own commits, or polling for pushes by people) a new index is
// built, reusing whatever blobs did not change, and watchers are woken.
//
// The assembled text has this shape; empty parts are left out:
//
//	<base prompt>
//
//	## Directory Rules (prompts/_rules.md)
//
//	<outermost _rules.md>
//
//	## Directory Rules (prompts/src/api/_rules.md)
//
//	<innermost _rules.md>
//
//	## Learned Rules (from feedback)
//
//	- [r-1a2b] Always …
//	  a second line of the same rule
package prompts
