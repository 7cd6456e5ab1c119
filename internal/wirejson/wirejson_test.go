package wirejson_test

import (
	"bytes"
	stdjson "encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ioharness/harness/internal/wirejson"
	"github.com/ioharness/harness/pkg/protocol"
)

// TestSameAsEncodingJSON: the hot path's messages decode to the values
// encoding/json decodes, HTML-sensitive text, raw arguments, images,
// times and unknown fields included, and a value of the wrong type is an
// error as it is there.
func TestSameAsEncodingJSON(t *testing.T) {
	task := sample()
	want, err := stdjson.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want[:len(want)-1], []byte(`,"future_field":{"x":[1,2]}}`)...)
	var a, b protocol.StepTask
	if err := stdjson.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := wirejson.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("decoded differently (-encoding/json +wirejson):\n%s", diff)
	}
	var bad protocol.StepTask
	if err := wirejson.Unmarshal([]byte(`{"run": 5}`), &bad); err == nil {
		t.Error("a number for a string field decoded without an error")
	}
}

// TestUnmarshalShared: decoding into strings that share the input gives
// what Unmarshal gives, escapes included, and refuses what it refuses,
// trailing bytes among them.
func TestUnmarshalShared(t *testing.T) {
	task := sample()
	data, err := stdjson.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	var a, b protocol.StepTask
	if err := wirejson.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	if err := wirejson.UnmarshalShared(append(data, " \n"...), &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("decoded differently (-Unmarshal +UnmarshalShared):\n%s", diff)
	}
	// A raw message is a copy: appending to it leaves the bytes the
	// strings share as they were.
	var v struct {
		A stdjson.RawMessage `json:"a"`
		B string             `json:"b"`
	}
	raw := []byte(`{"a":{"x":1},"b":"kept"}`)
	if err := wirejson.UnmarshalShared(raw, &v); err != nil {
		t.Fatal(err)
	}
	_ = append(v.A, "ZZZ"...)
	if v.B != "kept" || string(raw) != `{"a":{"x":1},"b":"kept"}` {
		t.Errorf("an append to a raw message wrote over the input: b = %q, input %s", v.B, raw)
	}
	for _, bad := range []string{`{"run": 5}`, `{"run": "a"} x`, `{"run": "a"}{}`, `{"run": "a`} {
		var v protocol.StepTask
		if err := wirejson.UnmarshalShared([]byte(bad), &v); err == nil {
			t.Errorf("UnmarshalShared(%s) decoded without an error", bad)
		}
	}
}

// TestMarshalStepTask: a step task encodes to what encoding/json writes,
// the same fields and values and the same length (a reservation is sized
// by it), its request byte for byte.
func TestMarshalStepTask(t *testing.T) {
	task := sample()
	got, err := wirejson.MarshalStepTask(task)
	if err != nil {
		t.Fatal(err)
	}
	want, err := stdjson.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d bytes, encoding/json writes %d:\n got %s\nwant %s", len(got), len(want), got, want)
	}
	var a, b map[string]stdjson.RawMessage
	if err := stdjson.Unmarshal(got, &a); err != nil {
		t.Fatal(err)
	}
	if err := stdjson.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, a, cmp.Transformer("string", func(r stdjson.RawMessage) string { return string(r) })); diff != "" {
		t.Errorf("fields differ (-encoding/json +MarshalStepTask):\n%s", diff)
	}
	for _, zero := range []*protocol.StepTask{{Run: "r"}, {Run: "r", Request: protocol.CompletionRequest{Messages: []protocol.Message{{}}}}} {
		got, _ := wirejson.MarshalStepTask(zero)
		want, _ := stdjson.Marshal(zero)
		if len(got) != len(want) {
			t.Errorf("zero task: %s, encoding/json writes %s", got, want)
		}
	}
	// Each task is its own bytes: the buffer they are laid out in is
	// reused by the next, and a task kept (for an attempt published
	// again) must not change with it.
	kept := slices.Clone(got)
	for range 3 {
		other := sample()
		other.Run, other.Request.Messages = "other", other.Request.Messages[:1]
		if _, err := wirejson.MarshalStepTask(other); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, kept) {
		t.Error("a step task's bytes changed when the next was encoded")
	}
}

// TestRequestUsesNoOmitzero: segmentio's encoder does not know omitzero,
// so MarshalStepTask and MarshalReply are exact only while no field a
// completion request or a sandbox reply holds uses it.
func TestRequestUsesNoOmitzero(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, at string) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Array || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			if strings.Contains(f.Tag.Get("json"), "omitzero") {
				t.Errorf("%s.%s uses omitzero: encode it with encoding/json in wirejson, or drop the tag", at, f.Name)
			}
			walk(f.Type, at+"."+f.Name)
		}
	}
	walk(reflect.TypeOf(protocol.CompletionRequest{}), "CompletionRequest")
	walk(reflect.TypeOf(protocol.SandboxReply{}), "SandboxReply")
}

// sample is a step task with the text a transcript can hold: HTML-like
// characters, a line separator, NUL, invalid UTF-8, raw arguments, an
// image, a deadline and a policy.
func sample() *protocol.StepTask {
	return &protocol.StepTask{Run: "r-1", Step: 7, Attempt: 2, Deadline: time.Date(2026, 12, 3, 10, 0, 0, 5, time.UTC),
		Policy: &protocol.Policy{Defaults: &protocol.Defaults{Read: "allow", Net: "deny"}},
		Request: protocol.CompletionRequest{Model: "m", System: "a <b> & \"c\" \u2028 é", MaxOutputTokens: 4096,
			Tools: []protocol.ToolSpec{{Name: "read_file", Description: "Read <a> file.", Parameters: stdjson.RawMessage(`{"type": "object"}`)}},
			Messages: []protocol.Message{
				{Role: protocol.RoleUser, Content: "Task: <fix> it & go\n\ttab", Images: []protocol.Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 255}}}},
				{Role: protocol.RoleAssistant, ToolCalls: []protocol.ToolCall{{ID: "c1", Name: "read_file", Arguments: stdjson.RawMessage(`{"path": "a<b>.go"}`)}}},
				{Role: protocol.RoleTool, ToolCallID: "c1", Content: "line\x00nul and \xff invalid utf-8"},
			}}}
}

// TestMarshalReply: a sandbox reply encodes byte for byte as encoding/json
// encodes it, the text an observation can hold included.
func TestMarshalReply(t *testing.T) {
	for _, r := range []*protocol.SandboxReply{
		{OpID: "o"},
		{OpID: "r.1.0.1", Node: "sb1", Observation: &protocol.Observation{CallID: "c1", Tool: "read_file",
			Content: "a <b> & \"c\" \u2028 é\x00 and \xff invalid", IsError: true, Changed: true,
			Exec: &protocol.ExecReport{ExitCode: 2}, Image: &protocol.Image{MediaType: "image/png", Data: []byte{0x89, 'P', 0, 255}}},
			Tools: []protocol.ToolSpec{{Name: "t", Description: "<d>", Parameters: stdjson.RawMessage(`{"type": "object"}`)}},
			Error: protocol.Errorf(protocol.CodeRefused, "refused <here> & now")},
	} {
		got, err := wirejson.MarshalReply(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := stdjson.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("MarshalReply =\n%s\nencoding/json writes\n%s", got, want)
		}
	}
}

// BenchmarkMarshalStepTask encodes the step task of a run 100 steps in,
// each step a read of a file of a few hundred bytes.
func BenchmarkMarshalStepTask(b *testing.B) {
	task := sample()
	task.Request.Messages = task.Request.Messages[:1]
	for i := range 100 {
		id := "call_" + strings.Repeat("x", 20) + string(rune('a'+i%26))
		task.Request.Messages = append(task.Request.Messages,
			protocol.Message{Role: protocol.RoleAssistant, Content: "Reading the next file.",
				ToolCalls: []protocol.ToolCall{{ID: id, Name: "read_file", Arguments: stdjson.RawMessage(`{"path":"src/file.go"}`)}}},
			protocol.Message{Role: protocol.RoleTool, ToolCallID: id, Content: strings.Repeat("package calc // a line of code\n", 12)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wirejson.MarshalStepTask(task); err != nil {
			b.Fatal(err)
		}
	}
}
