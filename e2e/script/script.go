// Package script is the model the e2e suite runs contracts against: the
// task names what to do ("e2e:append 40" appends forty lines with exec,
// then writes result.txt), and each turn is the next action of that
// plan, counted by the assistant turns already in the conversation. Like a
// real model it carries on whatever an observation said, so a run reaches
// its outcome through faults that change what a tool reported. The fake
// OpenAI server (e2e/fakellm) and the recorded cassettes both answer with
// it.
package script

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// Prefix starts every scripted task.
const Prefix = "e2e:"

// Plan is what a task asks for: a kind and a count.
type Plan struct {
	Kind string
	N    int
}

// Task is the task text of a plan.
func Task(kind string, n int) string { return fmt.Sprintf("%s%s %d", Prefix, kind, n) }

// Parse finds the plan in a request's first user message ("Task: e2e:...").
func Parse(req *protocol.CompletionRequest) (Plan, bool) {
	for _, m := range req.Messages {
		if m.Role != protocol.RoleUser {
			continue
		}
		i := strings.Index(m.Content, Prefix)
		if i < 0 {
			return Plan{}, false
		}
		line, _, _ := strings.Cut(m.Content[i+len(Prefix):], "\n")
		kind, count, _ := strings.Cut(strings.TrimSpace(line), " ")
		n, _ := strconv.Atoi(count)
		return Plan{Kind: kind, N: n}, true
	}
	return Plan{}, false
}

// Turn answers a request: the plan's next action. Past its end it repeats
// the last one, as a model asked again would.
func Turn(req *protocol.CompletionRequest) *protocol.Turn {
	plan, ok := Parse(req)
	if !ok {
		return &protocol.Turn{Text: "no e2e plan in the task", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5}}
	}
	done := 0
	for _, m := range req.Messages {
		if m.Role == protocol.RoleAssistant {
			done++
		}
	}
	step := done + 1 // 1-based
	call := func(name string, args any) *protocol.Turn {
		raw, _ := json.Marshal(args)
		return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: fmt.Sprintf("call_%d", step), Name: name, Arguments: raw}},
			Usage: protocol.Usage{InputTokens: int64(100 + 10*step), OutputTokens: 20}}
	}
	finish := call("write_file", map[string]string{"path": "result.txt", "content": "done\n"})
	switch plan.Kind {
	case "write": // N notes, then the result
		if step <= plan.N {
			return call("write_file", map[string]string{"path": fmt.Sprintf("notes/%03d.txt", step), "content": fmt.Sprintf("note %d\n", step)})
		}
	case "append": // N lines appended by a command, then the result
		if step <= plan.N {
			return call("exec", map[string]any{"argv": []string{"sh", "-c", fmt.Sprintf("echo line-%03d >> log.txt", step)}})
		}
	case "fix": // look, count with a command, then the result
		switch step {
		case 1:
			return call("read_file", map[string]string{"path": "input.txt"})
		case 2:
			return call("exec", map[string]any{"argv": []string{"wc", "-l", "input.txt"}})
		}
	case "secret": // a write the built-in secrets layer refuses, then the result
		if step == 1 {
			return call("write_file", map[string]string{"path": "deploy.pem", "content": "not a key\n"})
		}
	}
	return finish
}
