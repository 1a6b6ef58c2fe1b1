package embedding

// stopWords are dropped from the word features: Snowball's English list,
// its contractions as the tokenizer spells them (apostrophes removed), and
// a few more function words. Concept phrases still see them, so "out of
// date" can mean something while "of" alone does not.
var stopWords = []string{
	// Snowball English.
	"a", "about", "above", "after", "again", "against", "all", "am", "an",
	"and", "any", "are", "as", "at", "be", "because", "been", "before",
	"being", "below", "between", "both", "but", "by", "can", "did", "do",
	"does", "doing", "don", "down", "during", "each", "few", "for", "from",
	"further", "had", "has", "have", "having", "he", "her", "here", "hers",
	"herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is",
	"it", "its", "itself", "just", "me", "more", "most", "my", "myself",
	"no", "nor", "not", "now", "of", "off", "on", "once", "only", "or",
	"other", "our", "ours", "ourselves", "out", "over", "own", "s", "same",
	"she", "should", "so", "some", "such", "t", "than", "that", "the", "their",
	"theirs", "them", "themselves", "then", "there", "these", "they",
	"this", "those", "through", "to", "too", "under", "until", "up",
	"very", "was", "we", "were", "what", "when", "where", "which", "while",
	"who", "whom", "why", "will", "with", "you", "your", "yours", "yourself",
	"yourselves",
	// Contractions without their apostrophe.
	"dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "cant",
	"wont", "wouldnt", "shouldnt", "couldnt", "hasnt", "havent", "hadnt",
	"im", "ive", "id", "ill", "youre", "youve", "youll", "youd", "weve",
	"theyre", "theyve", "thats", "theres", "whats", "lets",
	// More function words.
	"would", "could", "may", "might", "must", "shall", "cannot", "also",
	"yet", "via", "us", "eg", "ie", "etc", "per", "one", "two", "every",
	"ever", "many", "much", "even", "whether", "either", "neither",
}

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
