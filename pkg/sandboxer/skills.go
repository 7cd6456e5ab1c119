package sandboxer

import (
	"io/fs"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/skills"
)

// skills reads the catalogue of the skills directory an open names, in
// the run's workspace w, following no symbolic link (tools.Workspace
// NoLinks): what it reads is inside the workspace whatever the workspace
// holds. The catalogue is the contract's to name, so it is read whatever
// the run's policy says; a skill's body is the agent's to read, through
// the policy, with read_skill. It returns nil for an open naming no skills.
// Errors: a *protocol.Error naming skills.dir and the file at fault.
func (s *Sandboxer) skills(w *workspace, spec *protocol.SkillsSpec) ([]protocol.Skill, error) {
	if spec == nil {
		return nil, nil
	}
	if !fs.ValidPath(spec.Dir) {
		return nil, protocol.FieldError(protocol.CodeInvalidField, "skills.dir", "name a directory relative to the workspace root, such as \"skills\"",
			"the skills directory %q is not a clean path inside the workspace", spec.Dir)
	}
	return skills.Load(w.ws.NoLinks(), spec.Dir)
}
