package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

var contractShape = reflect.TypeFor[Contract]()

// checkFields reports the first field in data, in sorted key order at each
// level, that typ does not define, as a dotted path ("budget.max_stepz").
// encoding/json names only the last key of an unknown field and matches
// keys without regard to case; this check names the whole path and is exact.
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
	return walkFields(v, typ, "")
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
