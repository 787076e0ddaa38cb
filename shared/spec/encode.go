package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Encode is s's stored form (the session item's spec attribute): its JSON,
// canonical once s is checked, so that the same configuration always
// encodes to the same text and a start compares two by equality. HTML is
// not escaped: encoding/json's default would store each <, > and & in six
// bytes, and DynamoDB bills and caps an item on its stored size.
func (s Spec) Encode() (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", fmt.Errorf("encode session spec: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// FieldNames are the JSON keys of a struct type's fields (t is a struct or
// a pointer to one), embedded structs' keys included: the keys a strict
// decoder accepts for it.
func FieldNames(t reflect.Type) []string {
	var out []string
	jsonFields(t, func(name string, _ reflect.Type) { out = append(out, name) })
	return out
}

// jsonFields calls fn with the JSON key and the type of each field of the
// struct t (or pointer to one) that encoding/json decodes, in order, the
// fields of untagged embedded structs in their place.
func jsonFields(t reflect.Type, fn func(name string, ft reflect.Type)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				jsonFields(et, fn)
				continue
			}
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fn(name, f.Type)
	}
}

// Stored is s, built in code, checked (its set fields count as given) and
// encoded: what ingest would store for it.
func (s Spec) Stored() (string, error) {
	if fe := s.Check(nil); fe != nil {
		return "", fe
	}
	return s.Encode()
}
