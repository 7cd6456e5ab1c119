package documents

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

func TestDecodeArgs(t *testing.T) {
	var a struct {
		Path string `json:"path"`
	}
	if err := DecodeArgs("t", json.RawMessage(`{"path":"a.pdf"}`), &a, `{"path": "a.pdf"}`); err != nil || a.Path != "a.pdf" {
		t.Fatalf("a good object: %v, %+v", err, a)
	}
	for _, bad := range []string{`{"path":"a","extra":1}`, `{"path":3}`, `{"path":"a"} {}`, `[1]`} {
		err := DecodeArgs("t", json.RawMessage(bad), &a, `{"path": "a.pdf"}`)
		if !errors.Is(err, protocol.ErrBadArguments) || !strings.Contains(err.Error(), `{"path": "a.pdf"}`) {
			t.Errorf("%s: %v, want bad arguments showing the shape", bad, err)
		}
	}
	if err := DecodeArgs("t", nil, &struct{}{}, "{}"); err != nil {
		t.Errorf("no arguments: %v", err)
	}
}

func TestCapped(t *testing.T) {
	env := &tools.Env{EntryCap: 600}
	if s := Capped(env, "short"); s != "short" {
		t.Errorf("short text changed: %q", s)
	}
	long := strings.Repeat("é", 5000)
	s := Capped(env, long)
	if n := utf8.RuneCountInString(s); n > 600 || !strings.HasPrefix(s, "éé") || !strings.Contains(s, "of 5000 characters") {
		t.Errorf("cut to %d characters: %q", n, s[len(s)-120:])
	}
	if EntryCap(nil) != tools.DefaultEntryCap || EntryCap(&tools.Env{EntryCap: 10}) != 512 {
		t.Errorf("EntryCap default or floor wrong")
	}
}
