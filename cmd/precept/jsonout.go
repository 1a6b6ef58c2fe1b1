package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// marshalJSON renders a response as -o json prints it: protojson with the
// proto field names, then enum values by their plain names ("REJECTED",
// as the decision JSON and the stream spell them, not
// "VERDICT_REJECTED"), and every control or invisible formatting
// character of a string written as a \u escape, so the output is safe
// on a terminal and still the same JSON. Keys keep protojson's order.
// multiline indents by two spaces; otherwise the output is one line.
func marshalJSON(msg proto.Message, multiline bool) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSON(dec)
	if err != nil {
		return nil, fmt.Errorf("re-read JSON: %w", err)
	}
	plainEnums(v, msg.ProtoReflect().Descriptor())
	var b bytes.Buffer
	v.write(&b, multiline, 0)
	return b.Bytes(), nil
}

// jsonValue is a decoded JSON value that keeps the order of object keys.
type jsonValue struct {
	// kind is '{' (object), '[' (array), 's' (string) or 'l' (a number,
	// true, false or null, kept as written in lit).
	kind byte
	keys []string
	vals []*jsonValue
	str  string
	lit  string
}

func decodeJSON(dec *json.Decoder) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		v := &jsonValue{kind: byte(t)}
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k.(string))
			}
			elem, err := decodeJSON(dec)
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, elem)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return v, nil
	case string:
		return &jsonValue{kind: 's', str: t}, nil
	case json.Number:
		return &jsonValue{kind: 'l', lit: t.String()}, nil
	case bool:
		return &jsonValue{kind: 'l', lit: fmt.Sprint(t)}, nil
	case nil:
		return &jsonValue{kind: 'l', lit: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// plainEnums renames the enum values of the message v renders, in place.
// Well-known types (timestamps, durations, structs) have JSON forms of
// their own and are left alone.
func plainEnums(v *jsonValue, md protoreflect.MessageDescriptor) {
	if v.kind != '{' || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return
	}
	for i, k := range v.keys {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			fd = md.Fields().ByJSONName(k)
		}
		if fd == nil {
			continue
		}
		val := v.vals[i]
		switch {
		case fd.IsMap():
			for _, elem := range val.vals {
				plainField(elem, fd.MapValue())
			}
		case fd.IsList():
			for _, elem := range val.vals {
				plainField(elem, fd)
			}
		default:
			plainField(val, fd)
		}
	}
}

func plainField(v *jsonValue, fd protoreflect.FieldDescriptor) {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if v.kind == 's' && fd.Enum().FullName() != "google.protobuf.NullValue" {
			v.str = plainEnumName(fd.Enum(), v.str)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		plainEnums(v, fd.Message())
	}
}

// plainEnumName drops the prefix every value of an enum carries (buf's
// ENUM_VALUE_PREFIX rule): Verdict's VERDICT_REJECTED is REJECTED,
// RuleStatus's RULE_STATUS_ACTIVE is ACTIVE.
func plainEnumName(ed protoreflect.EnumDescriptor, name string) string {
	if rest, ok := strings.CutPrefix(name, screamingSnake(string(ed.Name()))+"_"); ok && rest != "" {
		return rest
	}
	return name
}

// screamingSnake writes a CamelCase name as CAMEL_CASE ("HTTPStatus" as
// "HTTP_STATUS").
func screamingSnake(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
			i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// write renders v; depth is the nesting level for indentation.
func (v *jsonValue) write(b *bytes.Buffer, multiline bool, depth int) {
	newline := func(d int) {
		if multiline {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat("  ", d))
		}
	}
	switch v.kind {
	case 's':
		writeJSONString(b, v.str)
	case 'l':
		b.WriteString(v.lit)
	case '{', '[':
		open, close := byte('{'), byte('}')
		if v.kind == '[' {
			open, close = '[', ']'
		}
		b.WriteByte(open)
		for i, elem := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(depth + 1)
			if v.kind == '{' {
				writeJSONString(b, v.keys[i])
				b.WriteByte(':')
				if multiline {
					b.WriteByte(' ')
				}
			}
			elem.write(b, multiline, depth+1)
		}
		if len(v.vals) > 0 {
			newline(depth)
		}
		b.WriteByte(close)
	}
}

// writeJSONString writes s as a JSON string, escaping every character a
// terminal might obey or that shows nothing: C0 and C1 controls, DEL,
// format characters (bidirectional controls, zero-width characters) and
// line and paragraph separators.
func writeJSONString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r >= 0x7f && r <= 0x9f || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == utf8.RuneError:
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
