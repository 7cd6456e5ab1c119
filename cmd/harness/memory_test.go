package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/memory"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/wire"
)

// TestMemoryCommands is an operator's look at the notes agents keep,
// against a cluster on a NATS port: harness memory ls lists the
// workspaces, then one's notes (a relative root found as harness run makes
// it absolute); rm forgets one note, and a typo'd key is a usage error
// suggesting the key meant; clear forgets a workspace's notes, and one that
// keeps none is a usage error; a tenant's notes are apart; the notes
// outlast the cluster, read again through --data; malformed commands are
// usage errors.
func TestMemoryCommands(t *testing.T) {
	data := t.TempDir()
	cl, err := harness.Start(t.Context(), harness.Config{DataDir: data, Listen: "127.0.0.1:0", Provider: provider.NewScripted(), NoTakeover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), wire.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New(kv)
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	snap := "sha256-" + strings.Repeat("a", 64)
	for _, n := range []struct {
		store *memory.Store
		ws    protocol.Workspace
		key   string
	}{
		{store, protocol.Workspace{Root: "/srv/ws"}, "build"},
		{store, protocol.Workspace{Root: "/srv/ws"}, "layout"},
		{store, protocol.Workspace{Snapshot: snap}, "snap"},
		{store, protocol.Workspace{Root: here}, "here"},
		{store.Tenant("acme"), protocol.Workspace{Root: "/srv/ws"}, "secret"},
	} {
		if _, err := n.store.Put(t.Context(), n.ws, protocol.Note{Key: n.key, Value: "value of " + n.key, Run: "r1", Step: 2}); err != nil {
			t.Fatal(err)
		}
	}
	user, password := cl.Credentials()
	vars := map[string]string{"NATS_URL": cl.URL(), "NATS_USER": user, "NATS_PASSWORD": password}

	code, out, errOut := cli(t, t.Context(), vars, "memory", "ls", "--json")
	var sums []memory.Summary
	if code != exitOK || json.Unmarshal([]byte(out), &sums) != nil || len(sums) != 4 {
		t.Fatalf("memory ls = %d %+v\nstdout: %s\nstderr: %s", code, sums, out, errOut)
	}
	if code, out, _ := cli(t, t.Context(), vars, "memory", "ls"); code != exitOK || !strings.Contains(out, "root:/srv/ws") || !strings.Contains(out, "tenant:acme/root:/srv/ws") {
		t.Errorf("memory ls as text = %d\n%s", code, out)
	}
	listed := func(args ...string) []string {
		t.Helper()
		code, out, errOut := cli(t, t.Context(), vars, append([]string{"memory", "ls", "--json"}, args...)...)
		var got struct {
			Workspace string          `json:"workspace"`
			Notes     []protocol.Note `json:"notes"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("memory ls %v = %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
		var keys []string
		for _, n := range got.Notes {
			keys = append(keys, n.Key)
		}
		return keys
	}
	if got := strings.Join(listed("--workspace", "/srv/ws/"), " "); got != "build layout" {
		t.Errorf("the notes of /srv/ws/ = %q, want build layout", got)
	}
	if got := strings.Join(listed("--workspace", "."), " "); got != "here" {
		t.Errorf("the notes of . = %q, want those of %s", got, here)
	}
	if got := strings.Join(listed("--snapshot", snap), " "); got != "snap" {
		t.Errorf("the notes of the snapshot = %q", got)
	}
	if got := strings.Join(listed("--tenant", "acme", "--workspace", "/srv/ws"), " "); got != "secret" {
		t.Errorf("acme's notes of /srv/ws = %q, want its own alone", got)
	}
	if code, out, _ := cli(t, t.Context(), vars, "memory", "ls", "--workspace", "/srv/ws"); code != exitOK || !strings.Contains(out, "KEY") ||
		!strings.Contains(out, "value of layout") || !strings.Contains(out, "r1") {
		t.Errorf("memory ls --workspace as text = %d\n%s", code, out)
	}

	code, _, errOut = cli(t, t.Context(), vars, "memory", "rm", "--workspace", "/srv/ws", "biuld")
	if code != exitUsage || !strings.Contains(errOut, "not_found") || !strings.Contains(errOut, `did you mean "build"`) {
		t.Errorf("rm biuld = %d %q, want a usage error suggesting build", code, errOut)
	}
	if code, out, errOut := cli(t, t.Context(), vars, "memory", "rm", "--workspace", "/srv/ws", "build"); code != exitOK || !strings.Contains(out, `"build"`) {
		t.Errorf("rm build = %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if got := strings.Join(listed("--workspace", "/srv/ws"), " "); got != "layout" {
		t.Errorf("after rm build: %q, want layout", got)
	}
	if code, _, errOut := cli(t, t.Context(), vars, "memory", "clear", "--workspace", "/srv/wz"); code != exitUsage || !strings.Contains(errOut, "not_found") {
		t.Errorf("clear of a workspace without notes = %d %q, want a usage error", code, errOut)
	}
	code, out, errOut = cli(t, t.Context(), vars, "memory", "clear", "--workspace", "/srv/ws", "--json")
	var cleared struct {
		Workspace string `json:"workspace"`
		Cleared   int    `json:"cleared"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &cleared) != nil || cleared.Cleared != 1 || cleared.Workspace != "root:/srv/ws" {
		t.Errorf("clear = %d %+v\nstdout: %s\nstderr: %s", code, cleared, out, errOut)
	}
	if got := listed("--workspace", "/srv/ws"); len(got) != 0 {
		t.Errorf("after the clear: %v", got)
	}
	if got := listed("--tenant", "acme", "--workspace", "/srv/ws"); len(got) != 1 {
		t.Errorf("the operator's clear took acme's notes too: %v", got)
	}

	for _, args := range [][]string{
		{"memory"},
		{"memory", "forget"},
		{"memory", "rm", "build"},
		{"memory", "rm", "--workspace", "/srv/ws"},
		{"memory", "rm", "--workspace", "/srv/ws", "--snapshot", snap, "k"},
		{"memory", "ls", "--snapshot", "sha256-nope"},
		{"memory", "ls", "--tenant", "Not A Tenant"},
		{"memory", "clear"},
		{"memory", "ls", "extra"},
	} {
		if code, _, errOut := cli(t, t.Context(), vars, args...); code != exitUsage {
			t.Errorf("harness %s = %d, want %d\n%s", strings.Join(args, " "), code, exitUsage, errOut)
		}
	}

	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, t.Context(), nil, "memory", "ls", "--data", data, "--json")
	if code != exitOK || json.Unmarshal([]byte(out), &sums) != nil || len(sums) != 3 {
		t.Errorf("memory ls --data after the cluster stopped = %d %+v\nstdout: %s\nstderr: %s", code, sums, out, errOut)
	}
}
