package instructions

import "errors"

// Errors callers branch on.
var (
	// ErrInvalid: a request precept cannot write (a bad agent or stage
	// name, an unknown format, rule text holding a marker).
	ErrInvalid = errors.New("invalid instruction sync")
	// ErrMalformed: a file's markers cannot be read (a begin without an
	// end, an end without a begin, two blocks for one agent, a begin
	// marker missing its attributes). Nothing is written.
	ErrMalformed = errors.New("malformed precept markers")
	// ErrHandEdited: the text between a file's markers no longer matches
	// the SHA-256 its begin marker recorded, so someone edited it by hand.
	// The sync refuses unless told to overwrite.
	ErrHandEdited = errors.New("hand edits between precept markers")
	// ErrForeignCommit: the sync branch holds a commit precept did not
	// make (a person's fix on the open pull request). The sync refuses
	// to force-push it away unless told to overwrite.
	ErrForeignCommit = errors.New("a commit precept did not make on the sync branch")
	// ErrTooLarge: an instruction file is larger than MaxFileSize.
	ErrTooLarge = errors.New("instruction file too large")
)
