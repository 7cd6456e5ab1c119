package protocol

import "strings"

// Workspace names the directory the agent works in: one that lives on a
// sandboxer (Root), or one the contract carries as a snapshot in the
// object store (Snapshot). Exactly one is set.
type Workspace struct {
	// Root is the workspace directory as the sandboxer sees it. A relative
	// root is resolved by the sandboxer against its base directory.
	Root string `json:"root,omitempty"`
	// Snapshot is the ref ("sha256-" and 64 hex digits) of a snapshot
	// archive in the harness-workspaces object store: a sandboxer
	// materialises it into a directory of its own, and when the run ends
	// its changes come back as a Patch in the finished record.
	Snapshot string `json:"snapshot,omitempty"`
	// Commit asks for the run's changes to be committed with git in the
	// materialised workspace when the run ends. Snapshot workspaces only.
	Commit *CommitSpec `json:"commit,omitempty"`
}

// CommitSpec asks for a git commit of the run's changes.
type CommitSpec struct {
	// Message is the commit message; default "harness: " and the task's
	// first line.
	Message string `json:"message,omitempty"`
}

// ValidSnapshotRef reports whether ref names a snapshot or patch in the
// object store: "sha256-" and the 64 lower-case hex digits of the SHA-256 of
// its bytes.
func ValidSnapshotRef(ref string) bool {
	h, ok := strings.CutPrefix(ref, "sha256-")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (w Workspace) validate() error {
	root, snap := strings.TrimSpace(w.Root) != "", w.Snapshot != ""
	switch {
	case !root && !snap:
		return FieldError(CodeMissingField, "workspace.root", `name the directory the agent works in ("root"), or carry one ("snapshot", made by harness submit --workspace DIR)`,
			"the contract has no workspace")
	case root && snap:
		return FieldError(CodeInvalidField, "workspace", `set "root" or "snapshot", not both`, "the workspace is both a directory on a sandboxer and a snapshot")
	case strings.ContainsRune(w.Root, 0):
		return FieldError(CodeInvalidField, "workspace.root", "remove the NUL byte", "workspace root contains a NUL byte")
	case snap && !ValidSnapshotRef(w.Snapshot):
		return FieldError(CodeInvalidField, "workspace.snapshot", `use the ref harness submit --workspace printed: "sha256-" and 64 hex digits`,
			"%q is not a snapshot ref", clipField(w.Snapshot))
	case w.Commit != nil && !snap:
		return FieldError(CodeInvalidField, "workspace.commit", "commit applies to a snapshot workspace; commit in your own checkout of a root workspace",
			"commit is set on a root workspace")
	case w.Commit != nil && strings.ContainsRune(w.Commit.Message, 0):
		return FieldError(CodeInvalidField, "workspace.commit.message", "remove the NUL byte", "the commit message contains a NUL byte")
	}
	return nil
}

func clipField(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// MaxPatchFiles bounds the files a Patch lists; the rest are counted in
// FilesOmitted (the patch itself holds them all).
const MaxPatchFiles = 1000

// Patch is what a run changed in a snapshot workspace, collected by the
// sandboxer that held it when the run ended and recorded in the run's
// finished record.
type Patch struct {
	// Ref names the unified diff in the harness-workspaces object store;
	// empty when nothing changed.
	Ref string `json:"ref,omitempty"`
	// Size is the diff's length in bytes.
	Size int64 `json:"size"`
	// Files lists the changed files, at most MaxPatchFiles of them, in path
	// order.
	Files []FileChange `json:"files,omitempty"`
	// FilesOmitted counts the changed files past MaxPatchFiles.
	FilesOmitted int `json:"files_omitted,omitempty"`
	// Commit is the id of the git commit made in the materialised workspace,
	// when the contract asked for one and there was something to commit.
	Commit string `json:"commit,omitempty"`
	// Commits are the commits made in the workspace during the run, oldest
	// first: the agent's own (git_commit) and the one workspace.commit
	// asks for, each on top of the commit the snapshot's repository was at
	// when the run began.
	Commits []CommitInfo `json:"commits,omitempty"`
	// Series names, in the harness-workspaces object store, the Commits as
	// a patch series (git format-patch, binary changes included, one mail
	// per commit in an mbox) that git am applies to the directory the
	// snapshot was made of; empty when the run made no commit.
	Series string `json:"series,omitempty"`
	// Node is the sandboxer that held the workspace.
	Node string `json:"node,omitempty"`
	// Error says why the changes, or their commit, could not be collected.
	// The run's outcome stands either way.
	Error *Error `json:"error,omitempty"`
}

// How a file changed.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
	// ChangeMode is a change of the executable bit alone.
	ChangeMode = "mode"
)

// What a changed file is. Only text files (and changes of mode) are in the
// diff; the others are listed, not carried.
const (
	FileText    = "text"
	FileBinary  = "binary"
	FileSymlink = "symlink"
	FileSpecial = "special"
)

// FileChange is one changed path of a Patch.
type FileChange struct {
	Path   string `json:"path"`
	Change string `json:"change"`
	Kind   string `json:"kind"`
}
