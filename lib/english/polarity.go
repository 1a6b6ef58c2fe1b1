package english

// Polarity cues. The first cue in a text decides whether it prescribes
// (+1) or forbids (-1) what it talks about. Contractions are spelled
// without their apostrophe, as Polarity reads them.
var (
	negativePairs = pairSet("do not", "must not", "should not", "no longer", "shall not", "need not", "stop using", "get rid")
	positivePairs = pairSet("make sure", "be sure")
	negativeCues  = StopSet([]string{"never", "dont", "doesnt", "mustnt", "shouldnt", "avoid", "remove", "delete",
		"drop", "omit", "skip", "stop", "disable", "forbid", "forbidden", "prohibit", "refrain", "exclude",
		"eliminate", "strip"})
	positiveCues = StopSet([]string{"always", "add", "use", "include", "ensure", "prefer", "keep", "require",
		"enable", "must", "should", "write", "wrap", "log", "document", "validate", "check", "provide",
		"mention", "cite", "introduce", "insert"})
)

// pairSet splits two-word phrases into their words.
func pairSet(phrases ...string) map[[2]string]bool {
	m := make(map[[2]string]bool, len(phrases))
	for _, p := range phrases {
		ws := Tokens(p, Options{})
		m[[2]string{ws[0], ws[1]}] = true
	}
	return m
}

// polarityWords is how Polarity reads text: "don't" and "don’t" are
// both "dont".
var polarityWords = Options{ElideApostrophes: true}

// Polarity returns +1 when text prescribes something ("Always wrap
// errors", "Make sure …"), -1 when it forbids something ("Never log
// tokens", "Do not …", "Avoid …"), 0 when it has no directive cue. The
// rules' conflict guard reads it to tell opposing guidance from
// overlapping guidance, the impact preview for the guidance on main.
func Polarity(text string) int {
	ws := Tokens(text, polarityWords)
	for i, w := range ws {
		if i+1 < len(ws) {
			pair := [2]string{w, ws[i+1]}
			if negativePairs[pair] {
				return -1
			}
			if positivePairs[pair] {
				return 1
			}
		}
		if negativeCues[w] {
			return -1
		}
		if positiveCues[w] {
			return 1
		}
	}
	return 0
}
