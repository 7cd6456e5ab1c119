//go:build linux && (amd64 || arm64)

package native

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// NetworkHelperName is the program the native backend gives a command
// that may use the network its route out with: slirp4netns, user-mode
// networking from Debian's package of that name.
const NetworkHelperName = "slirp4netns"

// netReadyTimeout bounds the wait for the helper to set up the sandbox's
// interface.
const netReadyTimeout = 10 * time.Second

// errNoNetworkHelper is returned for a command that may use the network
// when the sandboxer has no helper to give it a route out.
var errNoNetworkHelper = protocol.Errorf(protocol.CodeUnsupported,
	"this command may use the network, but the native sandbox has no %s here to give it a route out that keeps the host's loopback services (the harness's own NATS among them) out of reach; install %s, or use the docker backend", NetworkHelperName, NetworkHelperName)

// attachNetwork gives the network namespace of the sandbox whose init is
// pid a route out: a tap interface with the address 10.0.2.100 and a
// default route, through slirp4netns running on the host. Connections go
// out as this process's own sockets, except to the host's loopback, which
// --disable-host-loopback refuses, so a sandboxed command reaches neither
// the host's 127.0.0.1 nor [::1] services. The returned stop ends the
// helper; the sandbox loses its route when it does.
func (n *Backend) attachNetwork(pid int) (stop func(), err error) {
	if n.netHelper == "" {
		return nil, errNoNetworkHelper
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("network helper pipe: %w", err)
	}
	exitR, exitW, err := os.Pipe()
	if err != nil {
		readyR.Close()
		readyW.Close()
		return nil, fmt.Errorf("network helper pipe: %w", err)
	}
	args := []string{"--configure", "--mtu=65520", "--disable-host-loopback",
		"--ready-fd=3", "--exit-fd=4"}
	if n.userns {
		args = append(args, "--userns-path=/proc/"+strconv.Itoa(pid)+"/ns/user")
	}
	args = append(args, strconv.Itoa(pid), "tap0")
	cmd := exec.Command(n.netHelper, args...)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{readyW, exitR}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	readyW.Close()
	exitR.Close()
	if err != nil {
		readyR.Close()
		exitW.Close()
		return nil, fmt.Errorf("start %s: %w", NetworkHelperName, err)
	}
	stop = func() {
		exitW.Close() // the helper exits when this end closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	ready := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		_, err := io.ReadFull(readyR, b)
		readyR.Close()
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(netReadyTimeout):
		err = errors.New("not ready in time")
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("%s did not set up the sandbox's network (%v): %s", NetworkHelperName, err, stderr.String())
	}
	return stop, nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
