package rules

// Polarity says whether a text prescribes (+1) or forbids (-1) what it
// talks about, or 0 when it has no directive cue. The conflict guard
// reads it to tell opposing guidance from overlapping guidance; the
// impact preview reads it for the guidance on main (docs/lifecycle.md,
// "Impact preview").
func Polarity(text string) int { return polarity(text) }
