// Package ooxmltest holds what the tests of the office format packages
// (xlsx, docx, pptx) and of package ooxml share: zip packages built in
// memory, hostile ones among them (a zip bomb, a member that lies about
// its size, XML nested deep), assertions on a document's text and on
// refusals, and a workspace to run the tools against. It is imported by
// tests only; each function fails the test it is given on an error of its
// own.
package ooxmltest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ioharness/harness/pkg/documents"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// Fixture returns the bytes of testdata/name, in the test's package
// folder.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Member is one file of a zip a test builds. With Raw set, Body is
// already deflated and the zip header claims Size bytes and CRC, whatever
// Body holds.
type Member struct {
	Name string
	Body []byte
	Raw  bool
	Size uint64
	CRC  uint32
}

// Zip returns a zip of members, in order.
func Zip(t testing.TB, members ...Member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		var w io.Writer
		var err error
		if m.Raw {
			w, err = zw.CreateRaw(&zip.FileHeader{Name: m.Name, Method: zip.Deflate, CRC32: m.CRC,
				CompressedSize64: uint64(len(m.Body)), UncompressedSize64: m.Size})
		} else {
			w, err = zw.Create(m.Name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.Body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Members returns the members of the zip pkg, decompressed, in order.
func Members(t testing.TB, pkg []byte) []Member {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(pkg), int64(len(pkg)))
	if err != nil {
		t.Fatal(err)
	}
	var ms []Member
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("zip member %s: %v", f.Name, err)
		}
		ms = append(ms, Member{Name: f.Name, Body: b})
	}
	return ms
}

// replace returns the zip pkg with its member m.Name replaced by m, in
// its place (added at the end when pkg has none).
func replace(t testing.TB, pkg []byte, m Member) []byte {
	t.Helper()
	ms := Members(t, pkg)
	found := false
	for i := range ms {
		if ms[i].Name == m.Name {
			ms[i], found = m, true
		}
	}
	if !found {
		ms = append(ms, m)
	}
	return Zip(t, ms...)
}

// WithMember returns the zip pkg with its member name holding body
// instead (added at the end when pkg has none).
func WithMember(t testing.TB, pkg []byte, name string, body []byte) []byte {
	t.Helper()
	return replace(t, pkg, Member{Name: name, Body: body})
}

// MemberOf returns the decompressed bytes of the member name of the zip
// pkg.
func MemberOf(t testing.TB, pkg []byte, name string) []byte {
	t.Helper()
	for _, m := range Members(t, pkg) {
		if m.Name == name {
			return m.Body
		}
	}
	t.Fatalf("the zip has no member %s", name)
	return nil
}

// BombSize is how far Bomb expands: past documents.DefaultLimits'
// MaxExpandedBytes.
const BombSize = 300 << 20

var (
	bombOnce sync.Once
	bombBody []byte
	bombCRC  uint32
)

// Bomb returns a deflate stream of BombSize zero bytes, and their CRC. It
// is made once for the test binary.
func Bomb(t testing.TB) ([]byte, uint32) {
	t.Helper()
	bombOnce.Do(func() {
		var buf bytes.Buffer
		w, err := flate.NewWriter(&buf, flate.BestSpeed)
		if err != nil {
			panic(err)
		}
		h := crc32.NewIEEE()
		if _, err := io.CopyN(io.MultiWriter(w, h), zeros{}, BombSize); err != nil {
			panic(err)
		}
		if err := w.Close(); err != nil {
			panic(err)
		}
		bombBody, bombCRC = buf.Bytes(), h.Sum32()
	})
	return bombBody, bombCRC
}

// WithBomb returns the zip pkg with its member name replaced by Bomb, the
// zip header claiming size bytes: BombSize for an honest bomb, less for
// one that lies.
func WithBomb(t testing.TB, pkg []byte, name string, size uint64) []byte {
	t.Helper()
	body, crc := Bomb(t)
	return replace(t, pkg, Member{Name: name, Body: body, Raw: true, Size: size, CRC: crc})
}

// zeros reads as zero bytes without end.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// Nested returns an XML element called name nested depth deep.
func Nested(name string, depth int) string {
	return strings.Repeat("<"+name+">", depth) + strings.Repeat("</"+name+">", depth)
}

// InOrder fails the test unless each of want is a line of got, in that
// order (other lines may come between them).
func InOrder(t testing.TB, got string, want ...string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	i := 0
	for _, w := range want {
		for i < len(lines) && lines[i] != w {
			i++
		}
		if i == len(lines) {
			t.Fatalf("the text lacks the line %q (after the lines before it); it is:\n%s", w, got)
		}
		i++
	}
}

// Refusal fails the test unless err is a refusal of the arguments
// (protocol.ErrBadArguments) whose message holds each of want.
func Refusal(t testing.TB, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, protocol.ErrBadArguments) {
		t.Fatalf("err = %v, want a bad_arguments refusal", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err = %v, want it to say %q", err, w)
		}
	}
}

// NewEnv returns a tools.Env over a fresh workspace, closed when the test
// ends, judged by judge (nil allows everything), and the workspace's
// folder.
func NewEnv(t testing.TB, judge func(act, rel string) error) (*tools.Env, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &tools.Env{Workspace: w, Judge: judge}, dir
}

// RefuseUnder returns a judge that refuses, with protocol.CodeRefused,
// every act on a path under prefix ("secret/"), and allows the rest.
func RefuseUnder(prefix string) func(act, rel string) error {
	return func(act, rel string) error {
		if strings.HasPrefix(rel, prefix) {
			return protocol.Errorf(protocol.CodeRefused, "the policy refuses to %s %s", act, rel)
		}
		return nil
	}
}

// Invoke calls tool in env with args, encoded as JSON, and returns what
// the tool returns.
func Invoke(t testing.TB, tool tools.Tool, env *tools.Env, args any) (*tools.Output, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tool.Invoke(context.Background(), env, raw)
}

// Isolated runs f twice, as the subtests "in-process" and "isolated": the
// second with documents.Isolate on, so that every operation runs in a
// child process. The test binary's TestMain must call
// documents.RunChildIfRequested for the child to serve.
func Isolated(t *testing.T, f func(t *testing.T)) {
	t.Run("in-process", f)
	t.Run("isolated", func(t *testing.T) {
		documents.Isolate(true)
		defer documents.Isolate(false)
		f(t)
	})
}
