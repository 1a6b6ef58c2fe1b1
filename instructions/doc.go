// Package instructions writes an agent's approved rules into the
// instruction files coding agents read in the repository they work on:
// AGENTS.md, CLAUDE.md, .github/copilot-instructions.md and Cursor's
// .cursor/rules/precept-<agent>.mdc (docs/instructions.md).
//
// The rules go between markers precept owns (docs/formats.md,
// "Instruction-file markers"); every byte outside them is kept. The begin
// marker records the prompt version the text was built with, so decisions
// made by an agent that read the file attribute to the right rules, and
// the SHA-256 of the text between the markers, so a hand edit there is
// detected and reported instead of being overwritten.
//
// Apply is the pure part: one file's old content in, its new content out.
// Sync runs Apply over the formats against a target repository behind the
// small Remote interface and commits the result on a branch of its own,
// ready to open as a pull request; lib/gitcli adapts the git CLI to it,
// and SyncURL puts the two together for the CLI and preceptd. Follow runs
// a sync for each new prompt version a watch yields, retrying failures,
// for preceptd's instructions.targets.
package instructions
