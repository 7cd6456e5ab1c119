package sandboxer

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// workspace is an open workspace on this node, shared by every run whose
// workspace is its directory: a tools.Workspace holds two descriptors and
// nothing of any one run, so ten thousand runs on one directory cost two
// descriptors, not twenty thousand. A snapshot workspace is a directory
// of its run's own, so it has one run.
type workspace struct {
	dir string
	ws  *tools.Workspace
	// runs counts the runs in Sandboxer.workspaces on it; the last to
	// close closes ws. Guarded by Sandboxer.mu.
	runs int
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

// workspace returns the run's open workspace. When this node holds none
// for the run yet, the run joins the workspace open on dir, or dir is
// opened for it when none is, or the one open is no longer the directory
// at dir.
func (s *Sandboxer) workspace(run, dir string) (*workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.workspaces[run]; ok {
		return w, nil
	}
	w, ok := s.byDir[dir]
	if !ok || !w.current() {
		ws, err := tools.OpenWorkspace(dir)
		if err != nil {
			return nil, err
		}
		// A workspace replaced here stays open for the runs already on
		// it, until they close.
		w = &workspace{dir: dir, ws: ws}
		s.byDir[dir] = w
	}
	w.runs++
	s.workspaces[run] = w
	return w, nil
}

// current reports whether w.dir still names the directory w holds open:
// it does not once the directory was removed, or made again in its
// place. Comparing device and inode numbers is enough, because the
// directory w holds keeps its inode, even removed, until w closes.
func (w *workspace) current() bool {
	held, err := w.ws.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(w.dir)
	return err == nil && os.SameFile(held, now)
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

// closeWorkspace lets go of the run's workspace, if this node holds one
// for it, and closes it when no other run is on it.
func (s *Sandboxer) closeWorkspace(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(run)
}

// closeWorkspaces closes every workspace this node holds open.
func (s *Sandboxer) closeWorkspaces() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for run := range s.workspaces {
		s.release(run)
	}
}

// release takes run off its workspace, closing it if run was the last on
// it. The caller holds s.mu.
func (s *Sandboxer) release(run string) {
	w, ok := s.workspaces[run]
	if !ok {
		return
	}
	delete(s.workspaces, run)
	w.runs--
	if w.runs > 0 {
		return
	}
	_ = w.ws.Close()
	if s.byDir[w.dir] == w { // not when replaced by a newer one on dir
		delete(s.byDir, w.dir)
	}
}
