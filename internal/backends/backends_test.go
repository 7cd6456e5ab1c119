package backends

import (
	"slices"
	"testing"
)

// TestControlPlane: the servers a sandboxer's URLs name, by address, for
// the routes its sandboxes give nowhere.
func TestControlPlane(t *testing.T) {
	got := ControlPlane("nats://10.0.0.5:4222,nats://[fd00::1]:4222", "redis://ledger:secret@192.0.2.9:6379/0", "tcp://198.51.100.3:2375", "", "192.0.2.44:4222")
	want := []string{"10.0.0.5", "fd00::1", "192.0.2.9", "198.51.100.3", "192.0.2.44"}
	if !slices.Equal(got, want) {
		t.Errorf("ControlPlane = %q, want %q", got, want)
	}
	if got := ControlPlane("unix:///var/run/docker.sock", "://"); len(got) != 0 {
		t.Errorf("ControlPlane of no host = %q, want none", got)
	}
}
