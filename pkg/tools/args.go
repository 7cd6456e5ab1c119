package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// kind is the JSON type of one tool argument.
type kind int

const (
	kindString      kind = iota // a JSON string
	kindStringArray             // a JSON array of strings
)

// shape describes a kind for a message to the model.
func (k kind) shape() string {
	if k == kindStringArray {
		return "an array of strings"
	}
	return "a string"
}

// param is one argument of a tool: the single source of its JSON Schema
// and of its strict decoding.
type param struct {
	name     string
	kind     kind
	required bool
	desc     string
	aliases  []string // other names accepted, not advertised
	example  string   // an example value, in JSON, for messages
}

// params is a tool's argument list.
type params []param

// schema returns the JSON Schema of the arguments.
func (ps params) schema() json.RawMessage {
	type prop struct {
		Type        string         `json:"type"`
		Items       map[string]any `json:"items,omitempty"`
		Description string         `json:"description"`
	}
	props := make(map[string]prop, len(ps))
	required := []string{}
	for _, p := range ps {
		pr := prop{Type: "string", Description: p.desc}
		if p.kind == kindStringArray {
			pr.Type, pr.Items = "array", map[string]any{"type": "string"}
		}
		props[p.name] = pr
		if p.required {
			required = append(required, p.name)
		}
	}
	b, err := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	})
	if err != nil {
		panic(err) // plain maps and strings always marshal
	}
	return b
}

// usage is a one-line reminder of the arguments, for messages.
func (ps params) usage(tool string) string {
	var parts []string
	for _, p := range ps {
		opt := ""
		if !p.required {
			opt = ", optional"
		}
		parts = append(parts, fmt.Sprintf("%s (%s%s)", p.name, p.kind.shape(), opt))
	}
	return tool + " takes " + strings.Join(parts, ", ")
}

// args holds decoded arguments by canonical name: a string or a []string.
type args map[string]any

// str returns a string argument, "" when absent.
func (a args) str(name string) string {
	s, _ := a[name].(string)
	return s
}

// has reports whether an argument was given (and not null).
func (a args) has(name string) bool {
	_, ok := a[name]
	return ok
}

// strs returns a string-array argument, nil when absent.
func (a args) strs(name string) []string {
	s, _ := a[name].([]string)
	return s
}

// decode checks raw against ps strictly and returns the arguments. Errors
// are *protocol.Error with CodeBadArguments naming the argument and the
// shape it needs: raw not a JSON object, an unknown argument, a wrong type,
// a required argument missing, or an argument given under two names. A
// null value counts as absent; empty or null raw counts as {}.
func (ps params) decode(tool string, raw json.RawMessage) (args, error) {
	usage := ps.usage(tool)
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, protocol.Errorf(protocol.CodeBadArguments, "the arguments must be one JSON object; %s", usage)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := args{}
	for _, k := range keys {
		i := slices.IndexFunc(ps, func(p param) bool { return p.name == k || slices.Contains(p.aliases, k) })
		if i < 0 {
			return nil, protocol.FieldError(protocol.CodeBadArguments, k, "", "%s has no argument %q; %s", tool, k, usage)
		}
		p := ps[i]
		v := bytes.TrimSpace(obj[k])
		if string(v) == "null" {
			continue
		}
		if out.has(p.name) {
			return nil, protocol.FieldError(protocol.CodeBadArguments, p.name, "", "argument %q was given twice (also as %q); give it once", p.name, k)
		}
		val, err := p.decodeValue(v)
		if err != nil {
			return nil, protocol.FieldError(protocol.CodeBadArguments, p.name, "", "%s; %s", err, usage)
		}
		out[p.name] = val
	}
	for _, p := range ps {
		if p.required && !out.has(p.name) {
			return nil, protocol.FieldError(protocol.CodeBadArguments, p.name, "", "the required argument %q is missing; %s", p.name, usage)
		}
	}
	return out, nil
}

// decodeValue decodes one argument's JSON value, or says why it does not
// fit.
func (p param) decodeValue(v json.RawMessage) (any, error) {
	got := jsonType(v)
	switch p.kind {
	case kindString:
		var s string
		if got != "a string" || json.Unmarshal(v, &s) != nil {
			return nil, fmt.Errorf("argument %q must be a string, not %s", p.name, got)
		}
		return s, nil
	default:
		if got == "a string" {
			msg := fmt.Sprintf("argument %q must be an array of strings, not one string", p.name)
			if p.example != "" {
				msg += ", such as " + p.example
			}
			return nil, fmt.Errorf("%s", msg)
		}
		var items []json.RawMessage
		if got != "an array" || json.Unmarshal(v, &items) != nil {
			return nil, fmt.Errorf("argument %q must be an array of strings, not %s", p.name, got)
		}
		ss := make([]string, len(items))
		for i, it := range items {
			if t := jsonType(it); t != "a string" || json.Unmarshal(it, &ss[i]) != nil {
				return nil, fmt.Errorf("argument %q must be an array of strings, but element %d is %s", p.name, i, t)
			}
		}
		return ss, nil
	}
}

// jsonType names the type of a JSON value for a message.
func jsonType(v json.RawMessage) string {
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
