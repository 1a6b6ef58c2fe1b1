package english

// Stop words, in lists callers combine into the set they need (StopSet):
// a caller that reads differently names the lists it takes and the words
// it leaves out, rather than keeping a list of its own.
var (
	// Snowball is Snowball's English stop-word list.
	Snowball = []string{
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
	}
	// Contractions are the contractions as Code spells them, without
	// their apostrophe.
	Contractions = []string{
		"dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "cant",
		"wont", "wouldnt", "shouldnt", "couldnt", "hasnt", "havent", "hadnt",
		"im", "ive", "id", "ill", "youre", "youve", "youll", "youd", "weve",
		"theyre", "theyve", "thats", "theres", "whats", "lets",
	}
	// FunctionWords are more words that carry grammar, not meaning.
	FunctionWords = []string{
		"would", "could", "may", "might", "must", "shall", "cannot", "also",
		"yet", "via", "us", "eg", "ie", "etc", "per", "one", "two", "every",
		"ever", "many", "much", "even", "whether", "either", "neither",
	}
	// Chatter is what reviewers write around what they mean: greetings,
	// thanks, hedges, fillers.
	Chatter = []string{
		"hi", "hey", "thanks", "thank", "pls", "please", "plz", "kindly", "maybe", "perhaps",
		"really", "actually", "basically", "still", "quite", "bit", "little", "lol", "imo",
		"imho", "fyi", "btw", "ok", "okay", "yeah", "hmm", "um", "oh", "ah", "well",
		"stuff", "thing", "things",
	}

	// Negations are the words that negate what follows, as Tokens and
	// Code spell them ("don't" or "dont"; "n't" and "nt" are what is left
	// of a contraction split at a typographic apostrophe). "none" is not
	// one: in review comments it is as often Python's None.
	Negations = []string{
		"no", "not", "never", "without", "nor", "nothing", "nobody", "dont", "doesnt",
		"didnt", "isnt", "arent", "wasnt", "werent", "cant", "cannot", "wont", "wouldnt", "shouldnt",
		"couldnt", "hasnt", "havent", "hadnt", "aint", "neither", "n't", "nt",
	}
)

var negations = StopSet(Negations)

// IsNegation reports whether a lower-case word is one of Negations.
func IsNegation(w string) bool { return negations[w] }

// Set is a set of lower-case words.
type Set map[string]bool

// StopSet returns the set of the words of lists.
func StopSet(lists ...[]string) Set {
	s := Set{}
	for _, l := range lists {
		for _, w := range l {
			s[w] = true
		}
	}
	return s
}

// Without returns s without the words of lists; s is unchanged.
func (s Set) Without(lists ...[]string) Set {
	out := make(Set, len(s))
	for w := range s {
		out[w] = true
	}
	for _, l := range lists {
		for _, w := range l {
			delete(out, w)
		}
	}
	return out
}
