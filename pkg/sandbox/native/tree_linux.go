//go:build linux && (amd64 || arm64)

package native

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// System calls of the new mount API (the same numbers on every
// architecture) and their flags.
const (
	sysOpenTree          = 428
	sysMoveMount         = 429
	openTreeClone        = 1
	openTreeCloexec      = syscall.O_CLOEXEC
	atEmptyPath          = 0x1000
	atSymlinkNofollow    = 0x100
	moveMountFEmptyPath  = 0x4
	mountAttrPropPrivate = syscall.MS_PRIVATE
)

// cloneTree returns a detached copy (open_tree with OPEN_TREE_CLONE) of
// the mounts at and below dir (not followed if it is a symlink), made
// nosuid, nodev and private so that
// nothing mounted on the host later propagates into it. It needs
// CAP_SYS_ADMIN over the sandboxer's mount namespace.
func cloneTree(dir string) (int, error) {
	p, err := syscall.BytePtrFromString(dir)
	if err != nil {
		return -1, err
	}
	cwd := atFDCWD
	fd, _, e := syscall.Syscall(sysOpenTree, uintptr(cwd), uintptr(unsafe.Pointer(p)), openTreeClone|openTreeCloexec|atRecursive|atSymlinkNofollow)
	if e != 0 {
		return -1, e
	}
	a := struct{ set, clr, prop, userns uint64 }{set: attrWritable, prop: mountAttrPropPrivate}
	empty := [1]byte{}
	if _, _, e := syscall.Syscall6(sysMountSetattr, fd, uintptr(unsafe.Pointer(&empty[0])), atEmptyPath|atRecursive, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0); e != 0 {
		syscall.Close(int(fd))
		return -1, e
	}
	return int(fd), nil
}

// canCloneTrees reports whether this process may clone mount trees
// (cloneTree): root in its mount namespace's user namespace.
func canCloneTrees() bool {
	fd, err := cloneTree(os.TempDir())
	if err != nil {
		return false
	}
	syscall.Close(fd)
	return true
}

// sendWorkspace clones the mounts of dir and passes them to the shim on
// sock (the shim's shimTreeFD), for it to attach as its workspace.
func sendWorkspace(sock *os.File, dir string) error {
	fd, err := cloneTree(dir)
	if err != nil {
		return fmt.Errorf("clone the mounts of the workspace %s: %w", dir, err)
	}
	defer syscall.Close(fd)
	if err := syscall.Sendmsg(int(sock.Fd()), []byte{0}, syscall.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("pass the workspace to the sandbox: %w", err)
	}
	return nil
}

// receiveWorkspace receives the workspace's mounts on shimTreeFD and
// attaches them at dir, a new directory of the sandbox's root.
func receiveWorkspace(dir string) error {
	var b [1]byte
	oob := make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := syscall.Recvmsg(shimTreeFD, b[:], oob, syscall.MSG_CMSG_CLOEXEC)
	if err != nil {
		return fmt.Errorf("receive the workspace: %w", err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("receive the workspace: no mount passed")
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("receive the workspace: no mount passed")
	}
	defer syscall.Close(fds[0])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mountErr("create mount point", dir, err)
	}
	p, err := syscall.BytePtrFromString(dir)
	if err != nil {
		return err
	}
	empty, cwd := [1]byte{}, atFDCWD
	if _, _, e := syscall.Syscall6(sysMoveMount, uintptr(fds[0]), uintptr(unsafe.Pointer(&empty[0])), uintptr(cwd), uintptr(unsafe.Pointer(p)), moveMountFEmptyPath, 0); e != 0 {
		return mountErr("attach the workspace at", dir, e)
	}
	return nil
}
