package embedding

import (
	"slices"

	"github.com/precept-dev/precept/lib/english"
)

// stopWords are dropped from the word features: Snowball's English list,
// its contractions as the tokenizer spells them (apostrophes removed), and
// a few more function words, all from lib/english. Concept phrases still
// see them, so "out of date" can mean something while "of" alone does
// not.
var stopWords = slices.Concat(english.Snowball, english.Contractions, english.FunctionWords)

// Term weights stand in for inverse document frequency, which a new
// installation cannot know: words that appear in feedback about anything
// ("please", "code", "agent", "fix") carry little of what a comment is
// about, so they are down-weighted to keep shared filler from making two
// unrelated complaints look alike. Words not listed weigh 1.
const (
	fillerWeight = 0.2
	commonWeight = 0.5
	numberWeight = 0.3
)

// fillerWords say almost nothing about the issue.
var fillerWords = []string{
	"please", "pls", "plz", "thanks", "thank", "need", "needs", "make",
	"makes", "code", "agent", "still", "really", "actually", "thing",
	"things", "stuff", "way", "lot", "lots", "ok", "okay", "like", "get",
	"got", "go", "going", "want", "see", "look", "let", "put", "take",
	"always", "never", "new", "use", "using", "used", "instead", "sure",
	"think", "know", "right", "well", "good", "bad", "better", "pr",
	"change", "changes", "fix", "fixes", "work", "works", "add", "adds",
	"added", "adding", "time", "least", "whole", "anything",
	"everything", "nothing", "something", "someone", "nobody", "everywhere",
	"throughout", "current", "actual", "real", "done",
	"merge", "merging", "ship", "shipping", "write", "writes", "written",
}

// commonWords are everyday software words: they matter in a phrase but say
// little on their own.
var commonWords = []string{
	"function", "functions", "func", "method", "methods", "file", "files",
	"line", "lines", "output", "value", "values", "call", "calls", "called",
	"return", "returns", "returned", "check", "checks", "handle", "handler",
	"implementation", "logic", "module", "package", "class", "object",
	"field", "fields", "result", "results", "data", "place",
	"part", "case", "cases", "step", "steps", "feature", "service",
	"repo", "repository", "commit", "version", "run", "runs",
}
