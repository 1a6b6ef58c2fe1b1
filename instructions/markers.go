package instructions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// The markers around precept's block (docs/formats.md, "Instruction-file
// markers"). A begin marker is one line:
//
//	<!-- precept:begin agent=<agent> stage=<stage> version=<prompt version> sha256=<hex> -->
//
// and the block ends at the next "<!-- precept:end -->". The sha256 is
// that of the bytes between the end of the begin marker's line and the
// start of the end marker, each "\r\n" read as "\n", so converting the
// file's line endings is no hand edit.
// MaxFileSize caps an instruction file precept reads (docs/thresholds.md):
// a larger one is refused, by name, rather than parsed and rewritten.
const MaxFileSize = 1 << 20

const (
	beginPrefix = "<!-- precept:begin"
	endMarker   = "<!-- precept:end -->"
	markerStem  = "<!-- precept:"
)

// Block is what precept writes for one agent: the assembled prompt and
// the version BuildPrompt returned for it.
type Block struct {
	Agent string
	Stage string
	// Path is the scope path the prompt was built for; it only shapes a
	// new Cursor rule's globs.
	Path    string
	Version string
	// Text is the prompt text, with "\n" line endings; it is written
	// with the file's own line endings.
	Text string
}

// Validate checks that the block can be written between markers.
func (b Block) Validate() error {
	if err := checkName("agent", b.Agent); err != nil {
		return err
	}
	if err := checkName("stage", b.Stage); err != nil {
		return err
	}
	if !versionPattern.MatchString(b.Version) {
		return fmt.Errorf("%w: prompt version %q", ErrInvalid, b.Version)
	}
	if strings.Contains(b.Text, markerStem) {
		return fmt.Errorf("%w: the rule text holds a precept marker", ErrInvalid)
	}
	return nil
}

// Outcome says what Apply did to a file.
type Outcome string

// The outcomes of Apply.
const (
	// Created: the file did not exist.
	Created Outcome = "created"
	// Appended: the file had no block for the agent; one was added at the end.
	Appended Outcome = "appended"
	// Replaced: the agent's block was replaced.
	Replaced Outcome = "replaced"
	// Unchanged: the block already held this text and version.
	Unchanged Outcome = "unchanged"
)

// HandEditError reports a block whose text was edited by hand.
type HandEditError struct {
	Path string
	// Recorded is the sha256 the begin marker holds; Found that of the
	// text between the markers now.
	Recorded, Found string
}

func (e *HandEditError) Error() string {
	return fmt.Sprintf("%s: the text between the precept markers was edited by hand (recorded sha256 %.12s…, found %.12s…); "+
		"move the edit out of the markers (or into a rule proposal) and sync again, or sync with overwrite to discard it",
		e.Path, e.Recorded, e.Found)
}

func (e *HandEditError) Unwrap() error { return ErrHandEdited }

// Apply returns the new content of the file at path for format f given
// its old content (exists false when there is none). Every byte outside
// the agent's markers is kept. A hand-edited block is a *HandEditError
// unless overwrite is set; unreadable markers are ErrMalformed. On error
// the old content stands.
func Apply(f Format, path string, old []byte, exists bool, b Block, overwrite bool) ([]byte, Outcome, error) {
	if err := b.Validate(); err != nil {
		return nil, "", err
	}
	if !exists {
		nl := "\n"
		var head string
		if f == Cursor {
			head = cursorHeader(b, nl)
		}
		return []byte(head + render(b, nl) + nl), Created, nil
	}
	if err := checkSize(old); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	blocks, err := parse(old)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	nl := lineEnding(old)
	var mine *span
	for i := range blocks {
		if blocks[i].agent != b.Agent {
			continue
		}
		if mine != nil {
			return nil, "", fmt.Errorf("%s: %w: two blocks for agent %s", path, ErrMalformed, b.Agent)
		}
		mine = &blocks[i]
	}
	if mine == nil {
		var sep string
		switch {
		case len(old) == 0:
		case !bytes.HasSuffix(old, []byte("\n")):
			sep = nl + nl
		default:
			sep = nl
		}
		out := append(append([]byte{}, old...), sep+render(b, nl)+nl...)
		return out, Appended, nil
	}
	body := old[mine.bodyStart:mine.bodyEnd]
	// A block written before line endings were normalised recorded the
	// digest of its raw bytes: that still matches.
	if found := digest(body); found != mine.sha && rawDigest(body) != mine.sha && !overwrite {
		return nil, "", &HandEditError{Path: path, Recorded: mine.sha, Found: found}
	}
	block := render(b, nl)
	if string(old[mine.start:mine.end]) == block {
		return old, Unchanged, nil
	}
	out := make([]byte, 0, len(old)-(mine.end-mine.start)+len(block))
	out = append(out, old[:mine.start]...)
	out = append(out, block...)
	out = append(out, old[mine.end:]...)
	return out, Replaced, nil
}

// render writes the block from its begin marker to its end marker, with
// nl as line ending and no line ending after the end marker.
func render(b Block, nl string) string {
	body := strings.TrimRight(b.Text, "\n")
	body = strings.ReplaceAll(body, "\r\n", "\n")
	if nl != "\n" {
		body = strings.ReplaceAll(body, "\n", nl)
	}
	body += nl
	return fmt.Sprintf("%s agent=%s stage=%s version=%s sha256=%s -->%s%s%s",
		beginPrefix, b.Agent, b.Stage, b.Version, digest([]byte(body)), nl, body, endMarker)
}

// digest is the SHA-256 of p with each "\r\n" read as "\n".
func digest(p []byte) string {
	return rawDigest(bytes.ReplaceAll(p, []byte("\r\n"), []byte("\n")))
}

func rawDigest(p []byte) string {
	s := sha256.Sum256(p)
	return hex.EncodeToString(s[:])
}

// lineEnding is "\r\n" when the file's first line ends so, else "\n".
func lineEnding(p []byte) string {
	if i := bytes.IndexByte(p, '\n'); i > 0 && p[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

func checkSize(p []byte) error {
	if len(p) > MaxFileSize {
		return fmt.Errorf("%w: %d bytes, more than the %d precept reads", ErrTooLarge, len(p), MaxFileSize)
	}
	return nil
}

// span is one block in a file: [start, end) runs from the begin marker to
// the end of the end marker, [bodyStart, bodyEnd) is the text between.
type span struct {
	agent, sha                     string
	start, end, bodyStart, bodyEnd int
	line                           int // of the begin marker
}

// parse finds every precept block in p. A marker counts only at the start
// of a line, so text quoting one mid-line is left alone.
func parse(p []byte) ([]span, error) {
	var out []span
	var open *span
	lineNo := 0
	for off := 0; off < len(p); {
		lineNo++
		lineEnd := bytes.IndexByte(p[off:], '\n')
		next := len(p)
		if lineEnd >= 0 {
			next = off + lineEnd + 1
		}
		line := strings.TrimRight(string(p[off:next]), "\r\n")
		switch {
		case strings.HasPrefix(line, beginPrefix):
			if open != nil {
				return nil, fmt.Errorf("%w: line %d: a begin marker inside the block begun on line %d", ErrMalformed, lineNo, open.line)
			}
			agent, sha, err := beginAttrs(line)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrMalformed, lineNo, err)
			}
			open = &span{agent: agent, sha: sha, start: off, bodyStart: next, line: lineNo}
		case strings.HasPrefix(line, endMarker):
			if open == nil {
				return nil, fmt.Errorf("%w: line %d: an end marker without a begin marker", ErrMalformed, lineNo)
			}
			open.bodyEnd, open.end = off, off+len(endMarker)
			out = append(out, *open)
			open = nil
		case strings.HasPrefix(line, markerStem):
			return nil, fmt.Errorf("%w: line %d: unknown precept marker %q", ErrMalformed, lineNo, clip(line))
		}
		off = next
	}
	if open != nil {
		return nil, fmt.Errorf("%w: line %d: a begin marker without an end marker", ErrMalformed, open.line)
	}
	return out, nil
}

// beginAttrs reads the agent and sha256 of a begin marker line.
func beginAttrs(line string) (agent, sha string, err error) {
	rest, ok := strings.CutSuffix(strings.TrimPrefix(line, beginPrefix), " -->")
	if !ok {
		return "", "", fmt.Errorf("begin marker not closed by \" -->\"")
	}
	attrs := map[string]string{}
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return "", "", fmt.Errorf("begin marker attribute %q is not key=value", clip(f))
		}
		if _, dup := attrs[k]; dup {
			return "", "", fmt.Errorf("begin marker names %s twice", clip(k))
		}
		attrs[k] = v
	}
	for _, k := range []string{"agent", "stage", "version", "sha256"} {
		if attrs[k] == "" {
			return "", "", fmt.Errorf("begin marker has no %s", k)
		}
	}
	if len(attrs["sha256"]) != 64 {
		return "", "", fmt.Errorf("begin marker sha256 is not 64 hex digits")
	}
	return attrs["agent"], attrs["sha256"], nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Recorded returns the prompt version recorded for agent in content, or
// "" when it holds no block for agent.
func Recorded(content []byte, agent string) (version string, err error) {
	if err := checkSize(content); err != nil {
		return "", err
	}
	blocks, err := parse(content)
	if err != nil {
		return "", err
	}
	for _, s := range blocks {
		if s.agent != agent {
			continue
		}
		line := strings.TrimRight(string(content[s.start:s.bodyStart]), "\r\n")
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "version="); ok {
				return v, nil
			}
		}
	}
	return "", nil
}
