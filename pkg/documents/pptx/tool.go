//go:build pptx || documents

package pptx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/documents/ooxml"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// decodeArgs decodes raw, one JSON object, into v strictly: a field v
// does not have, a value of the wrong type or anything after the object
// is refused with a CodeBadArguments error showing usage, the right
// shape. Empty or null raw decodes as {}.
func decodeArgs(tool string, raw json.RawMessage, v any, usage string) error {
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

// entryCap is the most characters one observation of env may hold, as
// the built-in tools count it.
func entryCap(env *tools.Env) int {
	switch {
	case env == nil || env.EntryCap == 0:
		return tools.DefaultEntryCap
	case env.EntryCap < 512:
		return 512
	}
	return env.EntryCap
}

// capped returns s cut to env's observation size, saying how much of it
// was left out.
func capped(env *tools.Env, s string) string {
	limit := entryCap(env)
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	note := func(cut int) string {
		return fmt.Sprintf("\n…[cut: left out the last %d of %d characters; the observation limit is %d]", cut, n, limit)
	}
	keep := max(limit-utf8.RuneCountInString(note(n)), 0)
	return s[:ooxml.RuneOffset(s, keep)] + note(n-keep)
}
