package documents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// DecodeArgs decodes raw, one JSON object, into v strictly, as every
// document tool reads its arguments: a field v does not have, a value of
// the wrong type or anything after the object is refused with a
// CodeBadArguments error showing usage, the right shape. Empty or null
// raw decodes as {}.
func DecodeArgs(tool string, raw json.RawMessage, v any, usage string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return protocol.Errorf(protocol.CodeBadArguments, "%s: the arguments do not fit (%v); give them as %s", tool, err, usage)
	}
	if d.More() {
		return protocol.Errorf(protocol.CodeBadArguments, "%s: the arguments must be one JSON object; give them as %s", tool, usage)
	}
	return nil
}

// EntryCap is the most characters one observation of env may hold, as
// the built-in tools count it: env's EntryCap with the default and the
// floor.
func EntryCap(env *tools.Env) int {
	switch {
	case env == nil || env.EntryCap == 0:
		return tools.DefaultEntryCap
	case env.EntryCap < 512:
		return 512
	}
	return env.EntryCap
}

// Capped returns s cut to env's observation size (EntryCap), its start
// kept and a last line saying how much was left out.
func Capped(env *tools.Env, s string) string {
	limit := EntryCap(env)
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	note := func(cut int) string {
		return fmt.Sprintf("\n…[cut: left out the last %d of %d characters; the observation limit is %d]", cut, n, limit)
	}
	keep := max(limit-utf8.RuneCountInString(note(n)), 0)
	i, k := len(s), 0
	for j := range s {
		if k == keep {
			i = j
			break
		}
		k++
	}
	return s[:i] + note(n-keep)
}

// ReadPath is the whole of a read-only document tool whose only argument
// is the file's path: it decodes {"path": ...} as tool's arguments (usage
// shows their shape), reads the file through env (the policy judging its
// path and every link on it), runs the operation op on its bytes and
// returns its text cut to env's observation size; empty says what an
// empty text means, with the path put in for its %s.
func ReadPath(ctx context.Context, env *tools.Env, tool, op, usage, empty string, raw json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := DecodeArgs(tool, raw, &a, usage); err != nil {
		return nil, err
	}
	if a.Path == "" {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "path", "", "%s needs the file's path; give it as %s", tool, usage)
	}
	in, err := env.ReadFile(a.Path)
	if err != nil {
		return nil, err
	}
	res, err := Call(ctx, op, nil, in)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(res.Text) == "" {
		return &tools.Output{Content: fmt.Sprintf(empty, a.Path)}, nil
	}
	return &tools.Output{Content: Capped(env, res.Text)}, nil
}
