package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

var contractShape = reflect.TypeFor[Contract]()

// checkFields reports the first key in data that appears twice in one
// object (see checkDuplicates), then the first field, in sorted key order
// at each level, that typ does not define, as a dotted path
// ("budget.max_stepz"). encoding/json names only the last key of an unknown
// field and matches keys without regard to case; this check names the whole
// path and is exact.
func checkFields(data []byte, typ reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return decodeError(err)
	}
	if _, ok := v.(map[string]any); !ok {
		return FieldError(CodeMalformed, "", "send one JSON object as described in docs/contract.md", "the contract must be a JSON object")
	}
	if err := checkDuplicates(data); err != nil {
		return err
	}
	return walkFields(v, typ, "")
}

// checkDuplicates reports the first key, in document order, that appears a
// second time in the same object, at any depth, as a CodeMalformed error
// naming its dotted path ("policy.defaults.write"). encoding/json keeps the
// last of duplicate keys without a word, so a contract read by a person (or
// checked by a tool) as saying "write": "deny" could run with a later
// "write": "allow" in the same object. Keys are compared exactly: keys that
// differ only in case are distinct keys, and checkFields refuses any that
// is not exactly a field's name.
//
// data must already be known to be valid JSON within encoding/json's
// nesting limit (checkFields decodes it first); the walk keeps its own
// stack, so it does not recurse.
func checkDuplicates(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// frame is an open object (seen set) or array (seen nil).
	type frame struct {
		path    string
		seen    map[string]struct{}
		key     string // the object's key whose value is being read
		wantKey bool   // the object's next token is a key
		n       int    // the array's next index
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return decodeError(err)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		at := ""
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.seen != nil && top.wantKey:
				k, _ := tok.(string)
				if _, dup := top.seen[k]; dup {
					return FieldError(CodeMalformed, join(top.path, k), "write each field once; a JSON decoder keeps only one of them, and which one is not something to rely on",
						"%s appears twice in %s", quoteField(k), orTop(top.path))
				}
				top.seen[k], top.key, top.wantKey = struct{}{}, k, false
				continue
			case top.seen != nil:
				at, top.wantKey = join(top.path, top.key), true
			default:
				at = fmt.Sprintf("%s[%d]", top.path, top.n)
				top.n++
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{path: at, seen: map[string]struct{}{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{path: at})
		}
	}
}

func walkFields(v any, typ reflect.Type, path string) error {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a type mismatch; the decoder reports it
		}
		if typ.NumField() == 0 && len(obj) == 0 {
			return nil
		}
		fields := jsonFields(typ)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			at := join(path, k)
			if !ok {
				return FieldError(CodeUnknownField, at, unknownHint(fields),
					"%s is not a field of %s", quoteField(k), orTop(path))
			}
			if err := walkFields(obj[k], ft, at); err != nil {
				return err
			}
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, e := range arr {
			if err := walkFields(e, typ.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonFields(typ reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, typ.NumField())
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

func unknownHint(fields map[string]reflect.Type) string {
	if len(fields) == 0 {
		return "this object takes no fields; write {}"
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return "known fields here: " + strings.Join(names, ", ")
}

func quoteField(k string) string { return fmt.Sprintf("%q", k) }

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
