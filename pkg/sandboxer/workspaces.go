package sandboxer

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// workspace is a run's open workspace on this node.
type workspace struct {
	dir string
	ws  *tools.Workspace
}

// workspaceFor returns the run's open workspace, opening it again from the
// op's root if this node lost it (a restart).
func (s *Sandboxer) workspaceFor(op *protocol.SandboxOp) (*workspace, error) {
	s.mu.Lock()
	w, ok := s.workspaces[op.Run]
	s.mu.Unlock()
	if ok {
		return w, nil
	}
	if op.Workspace == "" {
		return s.snapshotWorkspace(op.Run)
	}
	dir, err := s.resolveRoot(op.Workspace)
	if err != nil {
		return nil, err
	}
	return s.workspace(op.Run, dir)
}

// workspace returns the run's open workspace, opening dir as it when this
// node holds none for the run yet.
func (s *Sandboxer) workspace(run, dir string) (*workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workspaces[run]; ok {
		return w, nil
	}
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		return nil, err
	}
	w := &workspace{dir: dir, ws: ws}
	s.workspaces[run] = w
	return w, nil
}

// resolveRoot turns a contract's workspace root into a directory this node
// serves. Errors: CodeWorkspaceRefused when it lies outside every root,
// CodeNotFound when it does not exist or is not a directory.
func (s *Sandboxer) resolveRoot(root string) (string, error) {
	if root == "" || strings.ContainsRune(root, 0) {
		return "", protocol.Errorf(protocol.CodeWorkspaceRefused, "no workspace root")
	}
	dir := root
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(s.cfg.Base, dir)
	}
	dir = filepath.Clean(dir)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	served := false
	for _, r := range s.cfg.Roots {
		if dir == r || strings.HasPrefix(dir, r+string(filepath.Separator)) {
			served = true
			break
		}
	}
	if !served {
		return "", protocol.Errorf(protocol.CodeWorkspaceRefused, "workspace %s is outside the roots this sandboxer serves", root)
	}
	if err := RefuseRoot(dir, s.cfg.Reserved...); err != nil {
		return "", err
	}
	if s.inSnapshots(dir) {
		return "", protocol.Errorf(protocol.CodePathEscape, "workspace %s reaches this sandboxer's snapshot workspaces (%s); use a directory apart from them", root, s.cfg.SnapshotDir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeNotFound, "workspace %s: %s", root, err.Error())
	}
	if !fi.IsDir() {
		return "", protocol.Errorf(protocol.CodeNotFound, "workspace %s is not a directory", root)
	}
	return dir, nil
}

// closeWorkspace closes the run's workspace, if this node holds it open.
func (s *Sandboxer) closeWorkspace(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workspaces[run]; ok {
		_ = w.ws.Close()
		delete(s.workspaces, run)
	}
}

// closeWorkspaces closes every workspace this node holds open.
func (s *Sandboxer) closeWorkspaces() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for run, w := range s.workspaces {
		_ = w.ws.Close()
		delete(s.workspaces, run)
	}
}
