package sandbox

// Confinement labels, beside the cap labels (CapCPU, CapMemory, ...), for
// what an Enforcer declares. They name protections rather than limits, so
// they never appear in Report.CapHit.
const (
	// ConfineFilesystem: the root filesystem is read-only; the working
	// directory (the workspace) and a private /tmp are the only writable
	// trees, and the host's other files are not visible.
	ConfineFilesystem = "filesystem"
)

// Enforcer is an optional interface of a Backend: it declares the caps
// (CapCPU, CapWall, CapMemory, CapPids, CapOpenFiles, CapNetwork) and
// confinements (ConfineFilesystem) that the backend enforces on every
// command it runs on this machine. The conformance suite runs its
// containment tests for exactly these labels and skips the others with
// the reason. A backend that does not implement Enforcer is tested only
// for what every backend must do; per command, Report.Unenforced remains
// the authority on what protected that command.
type Enforcer interface {
	Enforces() []string
}

// ConfineProcesses: the command cannot see or signal the sandboxer or any
// other host process, and every process it starts is killed when it ends,
// including one that daemonised or called setsid(2).
const ConfineProcesses = "processes"

// LeftoverLister is an optional interface of a Backend that creates system
// objects for each command (cgroups, containers). Leftovers names those of
// this process that still exist, other than the backend's idle pool; a
// short while (well under a second) after the last command returned, the
// list must be empty, and the conformance suite checks that it is after
// many runs.
type LeftoverLister interface {
	Leftovers() ([]string, error)
}

// ProgramRunner is an optional interface of a Backend that runs programs
// of its own outside every sandbox (the native backend's
// harness-sandbox-init, the init of each sandbox). Programs names them; a
// sandboxer serves no workspace that contains one, or overlaps its
// directory, since an agent could otherwise rewrite a program the backend
// runs with the sandboxer's rights.
type ProgramRunner interface {
	Programs() []string
}
