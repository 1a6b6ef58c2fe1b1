// Package templates holds the fixed LLM prompt templates precept uses
// (text/template files), embedded so they ship with the binary and change
// only through review.
package templates

import "embed"

// FS holds every *.tmpl file of this directory.
//
//go:embed *.tmpl
var FS embed.FS
