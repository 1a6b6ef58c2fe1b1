// Package safetext holds the checks every text that may reach an agent's
// prompt or a person's terminal passes, in one place so the quality gate,
// the drafter, prompt assembly and the CLI agree
// (docs/decisions/0010-text-safety.md):
//
//   - Fold gives the form denylist matching compares: compatibility
//     characters replaced (fullwidth letters, ligatures), invisible
//     characters removed, look-alike letters of other scripts folded to
//     Latin with Unicode's confusables table, lower case.
//   - Control finds the characters rule text must never hold: control
//     characters other than line feed and tab, and bidirectional
//     embeddings, overrides and isolates.
//   - Secret and Redact find and remove credentials, also when invisible
//     characters split them.
//   - Denied matches the denylist of prompt-injection phrases through
//     folding, markup (HTML tags and entities, Markdown emphasis), letters
//     spelled out one by one, and base64-wrapped text.
//   - Escape writes control and invisible formatting characters out
//     visibly, so printed text cannot drive a terminal.
//
// The package depends on the standard library, golang.org/x/text and the
// confusables table only. The CLI links it for Escape; a program that
// never folds (the CLI) is linked without the confusables table.
package safetext
