// Package wordcount is the tool of the custom-tool example: word_count,
// which counts the words of a workspace file, reading through the
// tools.Env it is given, as every tool of an embedder's should.
package wordcount

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// Tool is word_count: it counts the words of a file in the workspace.
type Tool struct{}

// Spec describes the tool to the model.
func (Tool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name:        "word_count",
		Description: "Count the words of a file in the workspace.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],` +
			`"properties":{"path":{"type":"string","description":"the file, relative to the workspace root"}}}`),
	}
}

// Gate says a call reads the file its "path" argument names.
func (Tool) Gate() protocol.ToolGate { return protocol.ToolGate{Act: "read", Arg: "path"} }

// ReadOnly marks the tool as changing nothing: a call cut off by a crash
// is simply made again.
func (Tool) ReadOnly() {}

// Invoke counts the words of the file.
func (Tool) Invoke(_ context.Context, env *tools.Env, args json.RawMessage) (*tools.Output, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Path == "" {
		return nil, protocol.Errorf(protocol.CodeBadArguments, `give the file as {"path": "notes.txt"}`)
	}
	data, err := env.ReadFile(a.Path)
	if err != nil {
		return nil, err
	}
	return &tools.Output{Content: fmt.Sprintf("%s: %d words", a.Path, len(strings.Fields(string(data))))}, nil
}
