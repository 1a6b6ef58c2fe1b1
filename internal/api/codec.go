package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/precept-dev/precept/lib/jsonobj"
	"github.com/precept-dev/precept/lib/text"
)

// Codecs returns the handler options every Connect handler is built with:
// the strict JSON codec under both names Connect gives JSON. The binary
// protobuf codec stays the default one.
func Codecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(strictJSON{name: "json"}),
		connect.WithCodec(strictJSON{name: "json; charset=utf-8"}),
	}
}

// strictJSON decodes requests as the stream decodes events
// (docs/formats.md): an unknown field, a key given twice (also as its
// JSON name beside its proto name) or a duplicate map key is an error
// naming its path, where Connect's default codec drops unknown fields.
// Enum values may be given by their plain names ("REJECTED" for
// VERDICT_REJECTED), in any case, as the stream takes verdicts. Responses
// are written as the default codec writes them.
type strictJSON struct{ name string }

var _ connect.Codec = strictJSON{}

func (c strictJSON) Name() string { return c.name }

func (c strictJSON) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("marshal %T: not a protobuf message", message)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (c strictJSON) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal into %T: not a protobuf message", message)
	}
	if len(data) == 0 {
		return errors.New("an empty body is not a JSON object")
	}
	// protojson without DiscardUnknown already refuses unknown fields,
	// duplicates and repeated map keys, and is an order of magnitude
	// faster than the walk: what it accepts, the walk would too.
	if protojson.Unmarshal(data, m) == nil {
		return nil
	}
	proto.Reset(m)
	canonical, err := canonicalJSON(data, m.ProtoReflect().Descriptor())
	if err != nil {
		return err
	}
	// Every key is known by now; protojson still refuses what is left
	// (wrong types, oneofs set twice).
	return protojson.Unmarshal(canonical, m)
}

// canonicalJSON checks a message's JSON against its descriptor and
// rewrites plain enum names to full ones.
func canonicalJSON(data []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	var b bytes.Buffer
	if err := writeMessage(&b, "", md, bytes.TrimSpace(data)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeMessage writes a message's JSON object, checking each key.
// Anything but an object is copied for protojson to judge.
func writeMessage(b *bytes.Buffer, path string, md protoreflect.MessageDescriptor, raw []byte) error {
	if len(raw) == 0 || raw[0] != '{' {
		b.Write(raw)
		return nil
	}
	members, err := jsonobj.Members(raw)
	if err != nil {
		return fmt.Errorf("%sinvalid JSON: %v", prefix(path), err)
	}
	fields := md.Fields()
	given := map[protoreflect.FieldNumber]string{}
	b.WriteByte('{')
	for i, m := range members {
		fd := fields.ByJSONName(m.Name)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(m.Name))
		}
		key := join(path, text.Truncate(m.Name, 64))
		if fd == nil {
			return fmt.Errorf("%s: unknown field%s", key, fieldHint(fields, m.Name))
		}
		if earlier, ok := given[fd.Number()]; ok {
			if earlier == m.Name {
				return fmt.Errorf("%s: duplicate field", key)
			}
			return fmt.Errorf("%s: duplicate field (given as %s and %s)", join(path, string(fd.Name())), earlier, text.Truncate(m.Name, 64))
		}
		given[fd.Number()] = m.Name
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, m.Name)
		b.WriteByte(':')
		if err := writeField(b, join(path, string(fd.Name())), fd, m.Value); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writeField writes a field's value: a list, a map or a single value.
func writeField(b *bytes.Buffer, path string, fd protoreflect.FieldDescriptor, raw []byte) error {
	switch {
	case fd.IsList() && len(raw) > 0 && raw[0] == '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return fmt.Errorf("%s: invalid JSON: %v", path, err)
		}
		b.WriteByte('[')
		for i, e := range elems {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, fmt.Sprintf("%s[%d]", path, i), fd, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case fd.IsMap() && len(raw) > 0 && raw[0] == '{':
		members, err := jsonobj.Members(raw)
		if err != nil {
			return fmt.Errorf("%s: invalid JSON: %v", path, err)
		}
		seen := map[string]bool{}
		b.WriteByte('{')
		for i, m := range members {
			if seen[m.Name] {
				return fmt.Errorf("%s: duplicate key %q", path, text.Truncate(m.Name, 64))
			}
			seen[m.Name] = true
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, m.Name)
			b.WriteByte(':')
			if err := writeValue(b, fmt.Sprintf("%s[%q]", path, text.Truncate(m.Name, 64)), fd.MapValue(), m.Value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case fd.IsList() || fd.IsMap():
		b.Write(raw)
		return nil
	}
	return writeValue(b, path, fd, raw)
}

// writeValue writes one value of a field: enums by their full names,
// messages checked key by key. Well-known types (timestamps, durations,
// structs) have JSON forms of their own and are left to protojson.
func writeValue(b *bytes.Buffer, path string, fd protoreflect.FieldDescriptor, raw []byte) error {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if len(raw) == 0 || raw[0] != '"' {
			break
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s: invalid JSON: %v", path, err)
		}
		name, ok := enumValue(fd.Enum(), s)
		if !ok {
			return fmt.Errorf("%s: must be %s, got %q", path, enumNames(fd.Enum()), text.Truncate(s, 32))
		}
		writeString(b, name)
		return nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if md := fd.Message(); md.FullName().Parent() != "google.protobuf" {
			return writeMessage(b, path, md, raw)
		}
	}
	b.Write(raw)
	return nil
}

// enumValue finds the value s names: its full name, or its plain name
// (the full name without the enum's prefix), ignoring case.
func enumValue(ed protoreflect.EnumDescriptor, s string) (string, bool) {
	values := ed.Values()
	if v := values.ByName(protoreflect.Name(s)); v != nil {
		return s, true
	}
	prefix := enumPrefix(ed)
	for i := range values.Len() {
		name := string(values.Get(i).Name())
		if strings.EqualFold(name, s) || strings.EqualFold(strings.TrimPrefix(name, prefix), s) {
			return name, true
		}
	}
	return "", false
}

// enumNames lists an enum's plain names, leaving out its zero value
// (VERDICT_UNSPECIFIED), which means "not given".
func enumNames(ed protoreflect.EnumDescriptor) string {
	prefix := enumPrefix(ed)
	var names []string
	for i := range ed.Values().Len() {
		if v := ed.Values().Get(i); v.Number() != 0 {
			names = append(names, strings.TrimPrefix(string(v.Name()), prefix))
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// enumPrefix is the prefix the style guide gives an enum's values: its
// name in upper snake case and an underscore (ProposalStatus:
// PROPOSAL_STATUS_).
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	var b strings.Builder
	prevLower := false
	for _, r := range string(ed.Name()) {
		if unicode.IsUpper(r) && prevLower {
			b.WriteByte('_')
		}
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String() + "_"
}

// fieldHint names the field an unknown key differs from only in case.
func fieldHint(fields protoreflect.FieldDescriptors, key string) string {
	for i := range fields.Len() {
		fd := fields.Get(i)
		if strings.EqualFold(string(fd.Name()), key) || strings.EqualFold(fd.JSONName(), key) {
			return fmt.Sprintf(" (names are case-sensitive: did you mean %s?)", fd.Name())
		}
	}
	return ""
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	b.Write(enc)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}
