package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/sandbox"
)

// DefaultEntryCap is Env.EntryCap's default: the most characters one
// observation may hold.
const DefaultEntryCap = 12000

// minEntryCap is the least EntryCap honoured; below it the truncation
// notes alone would not fit.
const minEntryCap = 512

// Env is what a tool call runs against. The zero value of each optional
// field means its default.
type Env struct {
	// Workspace is the directory the file tools are confined to and where
	// exec runs. Required by every built-in tool.
	Workspace *Workspace
	// Sandbox runs exec's commands. Required by exec only.
	Sandbox sandbox.Backend
	// Limits caps each command exec runs; zero fields take the defaults
	// of protocol.Limits.WithDefaults.
	Limits protocol.Limits
	// Network allows exec's commands to reach the network.
	Network bool
	// CmdEnv is the complete environment of exec's commands (see
	// sandbox.MinimalEnv). Nil means an empty environment.
	CmdEnv []string
	// GitAuthor is who git_commit's commits are by, author and committer:
	// the contract's git.author, "Name <email>". The model never sets it.
	// Empty, git_commit is refused.
	GitAuthor string
	// EntryCap is the most characters (Unicode code points) one
	// observation may hold; default DefaultEntryCap, at least 512.
	EntryCap int
	// Judge, when set, is asked by every file tool, before it touches a
	// byte, whether act (ActRead or ActWrite) may be done to rel, a clean
	// workspace-relative path: for the path as the call named it and for
	// every path its resolution passes through (each symbolic link's
	// target, see Workspace.ResolveLinks), so that a link is judged by
	// where it leads as well as by its name; the strictest answer wins.
	// It returns nil to allow, or the refusal the model reads (a
	// *protocol.Error whose message names rel and the rule that refused
	// it); a refusal of a link's target is returned with a note naming
	// the link. grep and find ask it as a read for each entry they would
	// show, and leave out, without a word, an entry whose resolution it
	// refuses anywhere, so that a hidden file's bytes and existence are
	// not revealed. Nil allows everything.
	Judge func(act, rel string) error
}

// entryCap returns EntryCap with its default and floor applied.
func (e *Env) entryCap() int {
	switch {
	case e.EntryCap == 0:
		return DefaultEntryCap
	case e.EntryCap < minEntryCap:
		return minEntryCap
	}
	return e.EntryCap
}

// workspace returns the workspace or the error a tool returns without one.
func (e *Env) workspace(tool string) (*Workspace, error) {
	if e == nil || e.Workspace == nil {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "%s is not available: no workspace is open for this run", tool)
	}
	return e.Workspace, nil
}

// Output is what a successful tool call produced.
type Output struct {
	// Content is the observation the model sees, at most Env.EntryCap
	// characters.
	Content string
	// Changed says the call may have changed the workspace: true for a
	// write or edit that changed bytes, and always for exec.
	Changed bool
	// Exec is how exec's command ran; nil for the other tools.
	Exec *protocol.ExecReport
	// Image is a picture for the model (view_image); nil otherwise.
	Image *protocol.Image
}

// Tool is one capability offered to the model.
type Tool interface {
	// Spec describes the tool: its name, a description for the model and
	// the JSON Schema of its arguments.
	Spec() protocol.ToolSpec
	// Invoke runs one call with the JSON arguments the model wrote. A
	// returned error is a failed call the model will read: a
	// *protocol.Error whose message says what was refused and what to do
	// instead. The one exception is the end of ctx, returned as ctx.Err()
	// (wrapped), which means the call was abandoned, not failed.
	Invoke(ctx context.Context, env *Env, args json.RawMessage) (*Output, error)
}

// Failure is the observation of a failed call of the tool called name:
// the error's message and, for a *protocol.Error, its hint.
func Failure(name string, err error) string {
	msg := err.Error()
	var pe *protocol.Error
	if errors.As(err, &pe) {
		msg = pe.Message
		if pe.Hint != "" {
			msg += " (" + pe.Hint + ")"
		}
	}
	return fmt.Sprintf("[%s failed] %s", name, msg)
}

// ReadOnly is implemented by tools whose calls change nothing: reads and
// searches. A call of such a tool that was cut off (its node died under
// it) is simply run again; any other tool's is reported as indeterminate.
type ReadOnly interface {
	Tool
	ReadOnly()
}

// InProcess is implemented by tools whose calls run no command, server or
// archive: they read, search or write the workspace's files from the
// process that serves them, and end when that work does. A sandboxer runs
// their calls without taking one of its slots (which bound the commands
// running at once), so a run's read or edit never waits behind other
// runs' long commands.
type InProcess interface {
	Tool
	InProcess()
}

// Gated is implemented by a tool of an embedder's that says what its
// calls act on (Gate: an act and the argument naming its target), so the
// policy and a person asked to approve a call see a path, a command or a
// host rather than the tool's name. A tool that does not is judged as an
// exec of its name.
type Gated interface {
	Tool
	Gate() protocol.ToolGate
}

// Set is a toolbox: tools by name, in the order they were added. Tools
// added with Extend are extras, offered only to the runs whose contracts
// name them (Offered).
type Set struct {
	tools map[string]Tool
	order []string
	extra map[string]bool
}

// validName is what providers accept as a function name.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// NewSet returns a Set holding tools in the given order. It fails when a
// tool is nil, when a name is not 1 to 64 letters, digits, '_' or '-' or
// begins with protocol.MCPToolPrefix (the MCP servers' tools are named so,
// and no tool of a Set may take one of their names), or when two tools
// share a name.
func NewSet(tools ...Tool) (*Set, error) {
	s := &Set{tools: make(map[string]Tool, len(tools))}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tool %d is nil", i)
		}
		name := t.Spec().Name
		if !validName.MatchString(name) {
			return nil, fmt.Errorf("tool %d: name %q is not 1 to 64 letters, digits, '_' or '-'", i, name)
		}
		if strings.HasPrefix(name, protocol.MCPToolPrefix) {
			return nil, fmt.Errorf("tool %d: name %q begins with %q, which names the tools of a run's MCP servers; give it another name", i, name, protocol.MCPToolPrefix)
		}
		if _, dup := s.tools[name]; dup {
			return nil, fmt.Errorf("tool %d: duplicate tool name %q", i, name)
		}
		s.tools[name] = t
		s.order = append(s.order, name)
	}
	return s, nil
}

// Builtins returns the six workspace tools, in this order: grep, find,
// read_file, write_file, edit_file, exec.
func Builtins() *Set {
	s, err := NewSet(Grep{}, Find{}, ReadFile{}, WriteFile{}, EditFile{}, Exec{})
	if err != nil {
		panic(err) // the names above are fixed and distinct
	}
	return s
}

// BuiltinsWithImages is Builtins and view_image, for models that take
// images.
func BuiltinsWithImages() *Set {
	s, err := NewSet(Grep{}, Find{}, ReadFile{}, WriteFile{}, EditFile{}, Exec{}, ViewImage{})
	if err != nil {
		panic(err) // the names above are fixed and distinct
	}
	return s
}

// Specs returns the tools' specs in the order the tools were added, each
// with its Gate when it declares one.
func (s *Set) Specs() []protocol.ToolSpec {
	specs := make([]protocol.ToolSpec, 0, len(s.order))
	for _, n := range s.order {
		specs = append(specs, s.spec(n))
	}
	return specs
}

func (s *Set) spec(name string) protocol.ToolSpec {
	t := s.tools[name]
	spec := t.Spec()
	if g, ok := t.(Gated); ok {
		gt := g.Gate()
		spec.Gate = &gt
	}
	return spec
}

// Offered returns the specs of the tools a run whose contract names want
// is offered: every tool but the extras, and the extras it names, in the
// order the tools were added.
func (s *Set) Offered(want []string) []protocol.ToolSpec {
	var specs []protocol.ToolSpec
	for _, n := range s.order {
		if !s.extra[n] || slices.Contains(want, n) {
			specs = append(specs, s.spec(n))
		}
	}
	return specs
}

// Missing returns those of names the set does not hold.
func (s *Set) Missing(names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := s.tools[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// GateOf returns what a call of the tool called name acts on, as it
// declares it, or nil.
func (s *Set) GateOf(name string) *protocol.ToolGate {
	if g, ok := s.tools[name].(Gated); ok {
		gt := g.Gate()
		return &gt
	}
	return nil
}

// Extend returns base with extra added after its tools, as extras: an
// embedder's tools, offered only to the runs whose contracts name them.
// It refuses a name base holds or that is reserved (Reserved), two extras
// of one name, and a Gate that does not say an act and its argument.
func Extend(base *Set, extra ...Tool) (*Set, error) { return extend(base, true, extra...) }

// extend is Extend; reserved says whether the names the harness keeps
// are refused.
func extend(base *Set, reserved bool, extra ...Tool) (*Set, error) {
	s := &Set{tools: maps.Clone(base.tools), order: slices.Clone(base.order), extra: maps.Clone(base.extra)}
	if s.extra == nil {
		s.extra = map[string]bool{}
	}
	for i, t := range extra {
		if t == nil {
			return nil, fmt.Errorf("extra tool %d is nil", i)
		}
		name := t.Spec().Name
		switch {
		case !validName.MatchString(name):
			return nil, fmt.Errorf("extra tool %d: name %q is not 1 to 64 letters, digits, '_' or '-'", i, name)
		case reserved && Reserved(name):
			return nil, fmt.Errorf("extra tool %d: %q is a name the harness keeps for its own tools (the built-ins, spawn_agent, remember, read_skill, git_*, mcp__*)", i, name)
		case s.tools[name] != nil:
			return nil, fmt.Errorf("extra tool %d: duplicate tool name %q", i, name)
		}
		if g, ok := t.(Gated); ok {
			if err := checkGate(g.Gate()); err != nil {
				return nil, fmt.Errorf("extra tool %q: %w", name, err)
			}
		}
		s.tools[name] = t
		s.order = append(s.order, name)
		s.extra[name] = true
	}
	return s, nil
}

// checkGate refuses a declaration the gate could not apply.
func checkGate(g protocol.ToolGate) error {
	switch g.Act {
	case "read", "write", "exec", "net":
	default:
		return fmt.Errorf("gate act %q is not read, write, exec or net", g.Act)
	}
	if g.Arg == "" {
		return fmt.Errorf("gate of act %s names no argument", g.Act)
	}
	return nil
}

// Reserved reports whether name is kept for the harness's own tools: the
// built-ins (view_image among them), the coordinator's (spawn_agent,
// remember, read_skill), the git tools (git_*), the document tools of
// the builds with their tags (DocumentTag) and MCP servers' tools
// (mcp__*).
func Reserved(name string) bool {
	switch name {
	case "grep", "find", "read_file", "write_file", "edit_file", "exec", "view_image", "spawn_agent", "remember", "read_skill":
		return true
	}
	return DocumentTag(name) != "" || strings.HasPrefix(name, "git_") || strings.HasPrefix(name, "mcp__")
}

// documentTags are the document tools by name, with the build tag that
// compiles each in (package documents), in every build: so that no
// embedder's tool takes a document tool's name, and a refusal can name
// the tag a missing one needs.
var documentTags = map[string]string{
	"xlsx_sheets": "xlsx", "xlsx_read": "xlsx", "xlsx_write": "xlsx", "xlsx_set_cell": "xlsx",
	"docx_read": "docx", "docx_write": "docx",
	"pptx_read": "pptx",
	"pdf_read":  "pdf", "pdf_write": "pdf", "pdf_watermark": "pdf", "pdf_form_fields": "pdf", "pdf_fill_form": "pdf",
	"barcode_decode": "barcode",
}

// DocumentTag returns the build tag of the document tool called name, or
// "" for a name that is not one.
func DocumentTag(name string) string { return documentTags[name] }

// WithDocuments returns base with docs, a build's document tools, added
// as extras (offered to the runs whose contracts name them), as Extend
// adds an embedder's; their names are the reserved ones DocumentTag
// knows, and no other name is taken.
func WithDocuments(base *Set, docs ...Tool) (*Set, error) {
	for _, t := range docs {
		if t != nil && DocumentTag(t.Spec().Name) == "" {
			return nil, fmt.Errorf("tool %q is not a document tool", t.Spec().Name)
		}
	}
	return extend(base, false, docs...)
}

// Get returns the tool called name, and whether there is one.
func (s *Set) Get(name string) (Tool, bool) {
	t, ok := s.tools[name]
	return t, ok
}

// ReadOnly reports whether the tool called name changes nothing when
// called (it implements ReadOnly). An unknown name is not read-only.
func (s *Set) ReadOnly(name string) bool {
	_, ok := s.tools[name].(ReadOnly)
	return ok
}

// InProcess reports whether the tool called name runs no command, server
// or archive (it implements InProcess). An unknown name does not.
func (s *Set) InProcess(name string) bool {
	_, ok := s.tools[name].(InProcess)
	return ok
}

// Names returns the tools' names in the order the tools were added.
func (s *Set) Names() []string {
	return append([]string(nil), s.order...)
}

// Extra reports whether the tool called name is one of the extras
// (Extend): an embedder's, offered only to the contracts naming it.
func (s *Set) Extra(name string) bool { return s.extra[name] }
