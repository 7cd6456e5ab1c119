package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
)

// ReadSkillTool is the tool an agent reads one of its skills with, by
// name. It is offered to a run whose contract names skills, unless its
// sandboxer offers a tool of that name. A skill of a skills directory is
// answered as the read_file of its file; one of a skills snapshot as a
// read_skill call naming its path, "skills/" and the file's path in the
// snapshot, which the sandboxer answers from its own copy of the
// snapshot, outside the workspace. Either is judged by the run's policy
// as the read of that path here, and again, links included, by the
// sandboxer that reads it. The catalogue of names and descriptions is in
// the system prompt.
const ReadSkillTool = "read_skill"

var readSkillSpec = protocol.ToolSpec{
	Name: ReadSkillTool,
	Description: "Read one of the skills listed in the system prompt: instructions for a kind of work. " +
		"Read a skill when the task calls for what its description says.",
	Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["name"],` +
		`"properties":{"name":{"type":"string","description":"the skill's name, as the catalogue gives it"}}}`),
}

// offerSkills adds read_skill to the run's tools when its contract names
// skills, unless the sandboxer offers a tool of that name, which is then
// the sandboxer's to answer.
func (d *driver) offerSkills() {
	if d.s.contract.Skills == nil {
		return
	}
	if d.offers(ReadSkillTool) {
		d.log.Warn("the sandboxer offers a tool named " + ReadSkillTool + "; not offering the run's skills through it")
		return
	}
	d.tools = append(d.tools, readSkillSpec)
	d.skilling = true
}

// catalogue is the run's skills: as the trace recorded them when the
// workspace first opened (what the model was told), else as the
// sandboxer just read them.
func (d *driver) catalogue() []protocol.Skill {
	if d.s.skills != nil {
		return d.s.skills
	}
	return d.skills
}

// skillRead turns a read_skill call into the read of its skill's file,
// under the call's id, which is what the policy judges and the sandboxer
// carries out: a read_file of the file in the workspace for a skills
// directory, a read_skill of its path for a skills snapshot (the name
// the model gave is not passed on). It returns the failed call's
// observation instead for arguments that are not {"name": NAME} and for
// a name the catalogue does not hold (listing those it does).
func (d *driver) skillRead(call *protocol.ToolCall) (*protocol.ToolCall, *protocol.Observation) {
	fail := func(msg string) (*protocol.ToolCall, *protocol.Observation) {
		return nil, &protocol.Observation{CallID: call.ID, Tool: call.Name, Status: protocol.CallFailed, IsError: true, Content: msg}
	}
	var a struct {
		Name *string `json:"name"`
	}
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || a.Name == nil {
		msg := `[read_skill failed] give the skill's name, a string, such as {"name": "` + d.someSkill() + `"}`
		if err != nil {
			msg += ": " + err.Error()
		}
		return fail(msg)
	}
	cat := d.catalogue()
	for _, sk := range cat {
		if sk.Name == *a.Name {
			args, _ := json.Marshal(map[string]string{"path": sk.Path})
			name := "read_file"
			if d.s.contract.Skills.Snapshot != "" {
				name = ReadSkillTool
			}
			return &protocol.ToolCall{ID: call.ID, Name: name, Arguments: args}, nil
		}
	}
	names := make([]string, len(cat))
	for i, sk := range cat {
		names[i] = sk.Name
	}
	return fail(fmt.Sprintf("[read_skill failed] there is no skill %q; the skills are: %s", clip(*a.Name, 100), strings.Join(names, ", ")))
}

func (d *driver) someSkill() string {
	if cat := d.catalogue(); len(cat) > 0 {
		return cat[0].Name
	}
	return "NAME"
}

// asRead is call as the policy judges it: a read_skill call of a run
// offered its skills becomes the read_file of the skill's file; any other
// call is itself. The observation is set, and the call nil, for a
// read_skill call that names no skill of the catalogue.
func (d *driver) asRead(call *protocol.ToolCall) (*protocol.ToolCall, *protocol.Observation) {
	if call.Name != ReadSkillTool || !d.skilling {
		return call, nil
	}
	return d.skillRead(call)
}

// skillsPrompt is what the system prompt says of the run's skills: each
// by name and description, and how to read one.
func skillsPrompt(cat []protocol.Skill) string {
	if len(cat) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Skills: this task comes with instructions for particular kinds of work. When the task calls for one, read it with read_skill (its name) before you start that part; a skill is guidance for the task, not a task of its own.")
	for _, sk := range cat {
		fmt.Fprintf(&b, "\n- %s: %s", sk.Name, sk.Description)
	}
	return b.String()
}
