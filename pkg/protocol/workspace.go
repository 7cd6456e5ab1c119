package protocol

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Workspace names the directory the agent works in: one that lives on a
// sandboxer (Root), one the contract carries as a snapshot in the object
// store (Snapshot), or the one file the agent may see (File). Exactly one
// is set.
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
	// File is the one file the agent works on, as io-harness's
	// TaskContract::new has it: a path as the sandboxer sees it (a
	// relative one resolved against its base directory, as a root is).
	// The run's workspace is the file's directory, and its policy lets
	// the agent read and write that file alone: everything else there is
	// refused, and invisible to grep and find.
	File string `json:"file,omitempty"`
}

// Dir is the directory the run works in as the sandboxer sees it: Root,
// or the directory of File; "" for a snapshot.
func (w Workspace) Dir() string {
	if w.File != "" {
		return filepath.Dir(w.File)
	}
	return w.Root
}

// FileName is the name of a single-file workspace's file in its
// directory, the path the agent and the policy know it by; "" when the
// workspace is not one file.
func (w Workspace) FileName() string {
	if w.File == "" {
		return ""
	}
	return filepath.Base(w.File)
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
	root, snap, file := strings.TrimSpace(w.Root) != "", w.Snapshot != "", w.File != ""
	switch {
	case !root && !snap && !file:
		return FieldError(CodeMissingField, "workspace.root", `name the directory the agent works in ("root"), carry one ("snapshot", made by harness submit --workspace DIR), or name the one file it works on ("file")`,
			"the contract has no workspace")
	case file && (root || snap):
		return FieldError(CodeInvalidField, "workspace", `set "file" alone: its directory is the workspace`, "the workspace is both one file and a directory")
	case file:
		return w.validateFile()
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

// validateFile checks a single-file workspace's path: a clean path to a
// file (not a directory), whose name the policy can name exactly. Policy
// patterns are globs without escapes, so a name holding '*' or '?' would
// also name other files.
func (w Workspace) validateFile() error {
	const field = "workspace.file"
	f := w.File
	name := filepath.Base(f)
	switch {
	case w.Commit != nil:
		return FieldError(CodeInvalidField, "workspace.commit", "commit applies to a snapshot workspace", "commit is set on a single-file workspace")
	case strings.TrimSpace(f) == "":
		return FieldError(CodeMissingField, field, `name the file the agent works on, such as "/srv/notes/todo.md"`, "the file is blank")
	case strings.ContainsAny(f, "\x00\n\r"):
		return FieldError(CodeInvalidField, field, "remove the NUL, newline or carriage-return byte", "the file %q holds a control byte", clipField(f))
	case strings.HasSuffix(f, "/") || name == "." || name == ".." || name == "/":
		return FieldError(CodeInvalidField, field, `name a file, not a directory; for a directory use "root"`, "%q names a directory", clipField(f))
	case filepath.Clean(f) != f:
		return FieldError(CodeInvalidField, field, fmt.Sprintf("write it as %q", filepath.Clean(f)), "the file %q is not a clean path", clipField(f))
	case strings.ContainsAny(name, "*?"):
		return FieldError(CodeInvalidField, field, "rename the file without '*' or '?', which policy patterns read as wildcards",
			"the file name %q holds a glob wildcard, so no rule could name it alone", name)
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
