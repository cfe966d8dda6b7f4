package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// jsonError is the error member of a failed command's JSON document.
type jsonError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// jsonDocument returns the one JSON document of a command. It holds its
// result, nil when it printed none. When the command failed, the
// document's first member is {"error": {"code", "message"}}. So
// `meshctl … -o json | jq` never reads nothing.
func jsonDocument(result []byte, err error, code int) []byte {
	if err == nil {
		return result
	}
	je := jsonError{Code: code, Message: err.Error()}
	e, _ := indentJSON(je, "  ")
	var b bytes.Buffer
	b.WriteString("{\n  \"error\": ")
	b.Write(e)
	if members, ok := objectMembers(result); ok && members.has("error") {
		// The result says why already, as a window's history entry does.
		// The error object takes the place of its error, first, for one
		// shape across commands. The other members follow in their order.
		for _, m := range members {
			if m.key == "error" {
				continue
			}
			k, _ := json.Marshal(m.key)
			v, _ := indentJSON(m.value, "  ")
			fmt.Fprintf(&b, ",\n  %s: %s", k, v)
		}
		b.WriteString("\n}\n")
		return b.Bytes()
	}
	rest := bytes.TrimSpace(result)
	if len(rest) > 2 && rest[0] == '{' {
		// A partial result, such as an apply's report, has its members
		// follow the error.
		b.WriteString(",")
		b.Write(rest[1:])
	} else {
		b.WriteString("\n}")
	}
	b.WriteString("\n")
	return b.Bytes()
}

// member is one member of a JSON object.
type member struct {
	key   string
	value json.RawMessage
}

type members []member

func (ms members) has(key string) bool {
	for _, m := range ms {
		if m.key == key {
			return true
		}
	}
	return false
}

// objectMembers returns the members of the JSON object doc in their order.
// ok is false when doc is not an object.
func objectMembers(doc []byte) (out members, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{key, v})
	}
	return out, true
}

// marshalJSON encodes v as an indented JSON document in which every nil
// slice reads [], never null. A reader iterates over it without a check.
func marshalJSON(v any) ([]byte, error) {
	b, err := indentJSON(emptySlices(reflect.ValueOf(v)).Interface(), "")
	return append(b, '\n'), err
}

// indentJSON is json.MarshalIndent that writes <, > and & as they are.
// A reason such as "image: web:1 -> web:2" then reads the same as in text.
func indentJSON(v any, prefix string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	err := enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// emptySlices returns a copy of v whose nil slices are empty, at any depth
// of structs, pointers, maps, slices and interfaces. A nil pointer, map or
// interface stays nil, since it says "none", as null.
func emptySlices(v reflect.Value) reflect.Value {
	if !v.IsValid() {
		return v
	}
	t := v.Type()
	if t.Implements(marshalerType) && t.Kind() != reflect.Pointer {
		return v // a type that writes itself (time.Time)
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(emptySlices(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(t).Elem()
		out.Set(emptySlices(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(t).Elem()
		out.Set(v)
		for i := range t.NumField() {
			sf := t.Field(i)
			f := out.Field(i)
			if !sf.IsExported() || !f.CanSet() {
				continue
			}
			// A nil slice in an omitzero field stays nil. The field is left out,
			// as its type means it. A mesh file's "entrypoint": [] clears the
			// image's entrypoint, while no entrypoint keeps it.
			if f.Kind() == reflect.Slice && f.IsNil() && hasJSONOption(sf.Tag.Get("json"), "omitzero") {
				continue
			}
			f.Set(emptySlices(v.Field(i)))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			if t.Elem().Kind() == reflect.Uint8 {
				return v // []byte is a string in JSON
			}
			return reflect.MakeSlice(t, 0, 0)
		}
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(emptySlices(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(t, v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), emptySlices(it.Value()))
		}
		return out
	}
	return v
}

// hasJSONOption reports whether a json struct tag has option opt.
func hasJSONOption(tag, opt string) bool {
	_, opts, _ := strings.Cut(tag, ",")
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}
