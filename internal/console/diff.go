package console

import (
	"fmt"
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/precept-dev/precept/lib/text"
)

// diffLine is one line of a line diff as the page shows it: Text starts
// with its marker ("- ", "+ " or two spaces), so the diff reads without
// colour; Kind is "del", "ins", "same" or "skip" (unchanged lines left
// out, Text says how many).
type diffLine struct {
	Kind string
	Text string
}

// diffContext is how many unchanged lines are shown around a change.
const diffContext = 3

// Myers' diff costs O(N·D): two versions of a prompt share most of their
// lines and diff in well under a millisecond, but two unrelated base
// prompts would not. maxDiffLines bounds the lines of each side compared
// and diffTimeout the search: past it diffmatchpatch ends the diff with
// the rest deleted and inserted whole, still a correct diff, if not the
// shortest (docs/console.md, "Prompt explorer").
const (
	maxDiffLines = 4000
	diffTimeout  = 20 * time.Millisecond
)

// lineDiff returns the line diff of two texts, unchanged runs longer than
// twice diffContext shortened to their ends, and whether the texts were
// cut at maxDiffLines lines first. It uses the Myers diff of
// diffmatchpatch (as precept.EditDistancePercent does) over lines.
func lineDiff(from, to string) (lines []diffLine, cut bool) {
	a, cutA := firstLines(from, maxDiffLines)
	b, cutB := firstLines(to, maxDiffLines)
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = diffTimeout
	ca, cb, table := dmp.DiffLinesToChars(a, b)
	var all []diffLine
	for _, d := range dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), table) {
		kind, mark := "same", "  "
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			kind, mark = "del", "- "
		case diffmatchpatch.DiffInsert:
			kind, mark = "ins", "+ "
		}
		for _, l := range strings.SplitAfter(d.Text, "\n") {
			if l == "" {
				continue
			}
			all = append(all, diffLine{Kind: kind, Text: mark + strings.TrimSuffix(l, "\n")})
		}
	}
	return shorten(all, diffContext), cutA || cutB
}

// firstLines returns the first n lines of s, each ending in a newline (so
// a last line without one still equals the same line followed by more),
// and whether lines were left out.
func firstLines(s string, n int) (string, bool) {
	if s == "" {
		return "", false
	}
	end := 0
	for range n {
		i := strings.IndexByte(s[end:], '\n')
		if i < 0 {
			return s + "\n", false
		}
		end += i + 1
		if end == len(s) {
			return s, false
		}
	}
	return s[:end], true
}

// shorten replaces each run of unchanged lines longer than 2·context by
// its first and last context lines around a line saying how many were
// left out. A run at the start or end keeps only the lines next to a
// change.
func shorten(lines []diffLine, context int) []diffLine {
	var out []diffLine
	for i := 0; i < len(lines); {
		if lines[i].Kind != "same" {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && lines[j].Kind == "same" {
			j++
		}
		head, tail := context, context
		if i == 0 {
			head = 0
		}
		if j == len(lines) {
			tail = 0
		}
		if n := j - i; n > head+tail+1 {
			out = append(out, lines[i:i+head]...)
			skipped := n - head - tail
			out = append(out, diffLine{Kind: "skip", Text: fmt.Sprintf("… %d unchanged %s …", skipped, text.Plural(skipped, "line", "lines"))})
			out = append(out, lines[j-tail:j]...)
		} else {
			out = append(out, lines[i:j]...)
		}
		i = j
	}
	return out
}
