// Package jsonobj splits a JSON object into its members as sent: in
// order, with duplicate keys kept, so that strict decoders can refuse
// duplicates and case variants that encoding/json would merge
// (docs/decisions/0011-guard-before-the-body.md).
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Member is one key and raw value of a JSON object.
type Member struct {
	Name  string
	Value json.RawMessage
}

// ErrTrailing says something follows the object.
var ErrTrailing = errors.New("data after the JSON object")

// Members splits obj, a JSON object, into its members. Errors are
// encoding/json's, or ErrTrailing.
func Members(obj []byte) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var out []Member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		out = append(out, Member{Name: name, Value: value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ErrTrailing
	}
	return out, nil
}
