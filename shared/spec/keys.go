package spec

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"github.com/wsfleet/wsfleet/shared/suggest"
)

// MaxKeyDepth is how deeply CheckKeys lets objects and arrays nest.
const MaxKeyDepth = 16

// CheckKeys walks the tokens of the JSON text body, to be decoded into a
// value of type t. It returns the top-level keys the body gives a value
// other than null (Check's Keys: what tells an omitted field from an empty
// one, read in this walk rather than by parsing the body again), and
// refuses (a *KeyError) a key repeated in one object (encoding/json would
// silently keep the last one, and another parser on the path might keep
// the first), a key of an object decoded into a struct
// that is not one of its fields (FieldNames: through embedded structs and
// pointers, matched case-sensitively, where encoding/json alone would also
// take "WS_URL"), and nesting deeper than MaxKeyDepth. Below a map (headers)
// or an interface any key goes. Text that is not JSON is a *TokenError.
// Unlike json.Decoder.DisallowUnknownFields, the refusal names the key's
// whole path and the field it may have meant.
func CheckKeys(body []byte, t reflect.Type) (Keys, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*keyFrame
	given := Keys{}
	topValue := false // the token read next is the value of a top-level key
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 { // encoding/json's Token says EOF inside a value too
				return nil, &TokenError{Err: io.ErrUnexpectedEOF, Offset: dec.InputOffset()}
			}
			return given, nil
		}
		if err != nil {
			return nil, &TokenError{Err: err, Offset: dec.InputOffset()}
		}
		var top *keyFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if topValue {
			if tok != nil { // a JSON null is no value
				given[top.key] = true
			}
			topValue = false
		}
		if k, isKey := tok.(string); isKey && top != nil && top.object && top.expect {
			if top.keys[k] {
				return nil, &KeyError{Kind: KeyDuplicate, Path: joinKey(top.path, k)}
			}
			if top.fields != nil {
				if _, known := top.fields[k]; !known {
					return nil, &KeyError{Kind: KeyUnknown, Path: joinKey(top.path, k), Near: top.nearest(k)}
				}
			}
			top.keys[k] = true
			top.key = k
			top.expect = false
			topValue = len(stack) == 1
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) >= MaxKeyDepth {
					return nil, &KeyError{Kind: KeyTooDeep}
				}
				f := &keyFrame{object: d == '{', typ: t}
				if top != nil {
					f.typ, f.path = top.childType(), top.childPath()
				}
				f.typ = deref(f.typ)
				if f.object {
					f.keys, f.expect = map[string]bool{}, true
					if f.typ != nil && f.typ.Kind() == reflect.Struct {
						f.fields = fieldTypes(f.typ)
					}
				}
				stack = append(stack, f)
				continue
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		}
		// A value (or a closed container) completed: an enclosing object
		// expects a key next, an enclosing array its next element.
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.object {
				top.expect = true
			} else {
				top.index++
			}
		}
	}
}

// keyFrame is one open object or array of CheckKeys' walk.
type keyFrame struct {
	object bool
	typ    reflect.Type            // what it decodes into; nil: anything
	fields map[string]reflect.Type // a struct's keys; nil: any key goes
	path   string
	keys   map[string]bool
	expect bool   // in an object: the next token is a key
	key    string // in an object: the last key
	index  int    // in an array: the next element's index
}

// childPath is the path of the value being read in f.
func (f *keyFrame) childPath() string {
	if f.object {
		return joinKey(f.path, f.key)
	}
	return f.path + "[" + strconv.Itoa(f.index) + "]"
}

// childType is the type the value being read in f decodes into (nil:
// anything, or a type the decoder will refuse the value for).
func (f *keyFrame) childType() reflect.Type {
	if f.typ == nil {
		return nil
	}
	switch f.typ.Kind() {
	case reflect.Struct:
		if f.object {
			return f.fields[f.key]
		}
	case reflect.Map:
		if f.object {
			return f.typ.Elem()
		}
	case reflect.Slice, reflect.Array:
		if !f.object {
			return f.typ.Elem()
		}
	}
	return nil
}

// nearest is the path of the field of f that k looks like a misspelling
// of, or "".
func (f *keyFrame) nearest(k string) string {
	near := suggest.Nearest(k, slices.Collect(maps.Keys(f.fields)), 0)
	if near == "" {
		return ""
	}
	return joinKey(f.path, near)
}

func joinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// deref is the type a value of t is decoded into through its pointers, nil
// (anything) for a type that decodes itself (json.RawMessage).
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fieldTypes are the JSON keys of struct type t (FieldNames) and the types
// their values decode into.
func fieldTypes(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	jsonFields(t, func(name string, ft reflect.Type) { out[name] = ft })
	return out
}
