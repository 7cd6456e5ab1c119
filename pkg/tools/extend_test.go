package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// named is a tool of an embedder's with a name and, optionally, a gate.
type named struct {
	name string
	gate *protocol.ToolGate
}

func (n named) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{Name: n.name, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (n named) Invoke(context.Context, *tools.Env, json.RawMessage) (*tools.Output, error) {
	return &tools.Output{Content: n.name}, nil
}

type gated struct{ named }

func (g gated) Gate() protocol.ToolGate { return *g.gate }

// TestExtend: an embedder's tools are added after the built-ins as
// extras, offered only to the runs that name them, each with the gate it
// declares; a reserved or taken name, two extras of one name and a gate
// that says no act or argument are refused at registration.
func TestExtend(t *testing.T) {
	s, err := tools.Extend(tools.Builtins(), named{name: "page_rank"}, gated{named{name: "word_count", gate: &protocol.ToolGate{Act: "read", Arg: "path"}}})
	if err != nil {
		t.Fatal(err)
	}
	names := func(specs []protocol.ToolSpec) []string {
		var out []string
		for _, sp := range specs {
			out = append(out, sp.Name)
		}
		return out
	}
	if got := names(s.Offered(nil)); slices.Contains(got, "page_rank") || slices.Contains(got, "word_count") || !slices.Contains(got, "exec") {
		t.Errorf("offered to a run naming none = %v, want the built-ins alone", got)
	}
	if got := names(s.Offered([]string{"word_count"})); !slices.Contains(got, "word_count") || slices.Contains(got, "page_rank") {
		t.Errorf("offered to a run naming word_count = %v", got)
	}
	if g := s.GateOf("word_count"); g == nil || g.Act != "read" || g.Arg != "path" {
		t.Errorf("GateOf(word_count) = %+v, want read of path", g)
	}
	if g := s.GateOf("page_rank"); g != nil {
		t.Errorf("GateOf(page_rank) = %+v, want none (judged as an exec of its name)", g)
	}
	for _, sp := range s.Specs() {
		if sp.Name == "word_count" && (sp.Gate == nil || sp.Gate.Arg != "path") {
			t.Errorf("word_count's spec carries gate %+v", sp.Gate)
		}
	}
	if m := s.Missing([]string{"word_count", "nope", "grep"}); !slices.Equal(m, []string{"nope"}) {
		t.Errorf("Missing = %v, want [nope]", m)
	}
	for _, tt := range []struct {
		name  string
		extra []tools.Tool
		want  string
	}{
		{"a built-in's name", []tools.Tool{named{name: "read_file"}}, "keeps"},
		{"view_image", []tools.Tool{named{name: "view_image"}}, "keeps"},
		{"spawn_agent", []tools.Tool{named{name: "spawn_agent"}}, "keeps"},
		{"remember", []tools.Tool{named{name: "remember"}}, "keeps"},
		{"an MCP name", []tools.Tool{named{name: "mcp__github__x"}}, "keeps"},
		{"a git tool's name", []tools.Tool{named{name: "git_push"}}, "keeps"},
		{"a document tool's name", []tools.Tool{named{name: "pdf_fill_form"}}, "keeps"},
		{"twice", []tools.Tool{named{name: "a"}, named{name: "a"}}, "duplicate"},
		{"a bad name", []tools.Tool{named{name: "a b"}}, "not 1 to 64"},
		{"a gate with no act", []tools.Tool{gated{named{name: "g", gate: &protocol.ToolGate{Act: "delete", Arg: "path"}}}}, "not read, write, exec or net"},
		{"a gate with no argument", []tools.Tool{gated{named{name: "g", gate: &protocol.ToolGate{Act: "write"}}}}, "names no argument"},
		{"nil", []tools.Tool{nil}, "nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tools.Extend(tools.Builtins(), tt.extra...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Extend = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestWithDocuments adds a build's document tools as extras, under the
// names the harness keeps for them, and no other name.
func TestWithDocuments(t *testing.T) {
	s, err := tools.WithDocuments(tools.Builtins(), named{name: "pdf_read"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Extra("pdf_read") || tools.DocumentTag("pdf_read") != "pdf" {
		t.Errorf("pdf_read: extra %v, tag %q; want an extra of the pdf tag", s.Extra("pdf_read"), tools.DocumentTag("pdf_read"))
	}
	if _, err := tools.WithDocuments(tools.Builtins(), named{name: "word_count"}); err == nil {
		t.Error("WithDocuments took a tool that is not a document tool")
	}
}
