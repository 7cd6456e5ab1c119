//go:build pptx || documents

package pptx

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

// TestMain lets the test binary serve as the child process of an
// isolated operation (documents.Isolate), after init has registered the
// operations.
func TestMain(m *testing.M) {
	documents.RunChildIfRequested()
	os.Exit(m.Run())
}

// fixture returns the bytes of testdata/name.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// member is one file of a zip a test builds. With raw set, body is
// already deflated and the header claims size bytes and crc.
type member struct {
	name string
	body []byte
	raw  bool
	size uint64
	crc  uint32
}

// zipOf builds a zip of members, in order.
func zipOf(t *testing.T, members ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		var w io.Writer
		var err error
		if m.raw {
			w, err = zw.CreateRaw(&zip.FileHeader{Name: m.name, Method: zip.Deflate, CRC32: m.crc,
				CompressedSize64: uint64(len(m.body)), UncompressedSize64: m.size})
		} else {
			w, err = zw.Create(m.name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withMember returns the zip pkg with the member name holding body
// instead (added when pkg has none).
func withMember(t *testing.T, pkg []byte, name string, body []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(pkg), int64(len(pkg)))
	if err != nil {
		t.Fatal(err)
	}
	var ms []member
	found := false
	for _, f := range zr.File {
		if f.Name == name {
			ms, found = append(ms, member{name: name, body: body}), true
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, member{name: f.Name, body: b})
	}
	if !found {
		ms = append(ms, member{name: name, body: body})
	}
	return zipOf(t, ms...)
}

// memberOf returns the member name of the zip pkg.
func memberOf(t *testing.T, pkg []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(pkg), int64(len(pkg)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("the zip has no member %s", name)
	return nil
}

// bombSize is how far the bomb expands: past the expanded-size limit.
const bombSize = 300 << 20

var (
	bombOnce sync.Once
	bombBody []byte
	bombCRC  uint32
)

// bomb returns a deflate stream of bombSize zero bytes, and their CRC.
func bomb(t *testing.T) ([]byte, uint32) {
	t.Helper()
	bombOnce.Do(func() {
		var buf bytes.Buffer
		w, err := flate.NewWriter(&buf, flate.BestSpeed)
		if err != nil {
			panic(err)
		}
		h := crc32.NewIEEE()
		if _, err := io.CopyN(io.MultiWriter(w, h), zeros{}, bombSize); err != nil {
			panic(err)
		}
		if err := w.Close(); err != nil {
			panic(err)
		}
		bombBody, bombCRC = buf.Bytes(), h.Sum32()
	})
	return bombBody, bombCRC
}

// zeros reads as zero bytes without end.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// nested is an XML element nested depth deep.
func nested(name string, depth int) string {
	return strings.Repeat("<"+name+">", depth) + strings.Repeat("</"+name+">", depth)
}

// inOrder fails unless each of want is a line of got, in that order.
func inOrder(t *testing.T, got string, want ...string) {
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

// refusal fails unless err is a bad-arguments refusal whose message
// holds each of want.
func refusal(t *testing.T, err error, want ...string) {
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

// newEnv returns an Env over a fresh workspace, judged by judge (nil
// allows all), and the workspace's directory.
func newEnv(t *testing.T, judge func(act, rel string) error) (*tools.Env, string) {
	t.Helper()
	dir := t.TempDir()
	w, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &tools.Env{Workspace: w, Judge: judge}, dir
}

// refuseUnder is a Judge that refuses every act on paths under prefix.
func refuseUnder(prefix string) func(act, rel string) error {
	return func(act, rel string) error {
		if strings.HasPrefix(rel, prefix) {
			return protocol.Errorf(protocol.CodeRefused, "the policy refuses to %s %s", act, rel)
		}
		return nil
	}
}

// invoke calls tool with args.
func invoke(t *testing.T, tool tools.Tool, env *tools.Env, args any) (*tools.Output, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tool.Invoke(context.Background(), env, raw)
}

// isolated runs f once in this process and once with the operations in a
// child process.
func isolated(t *testing.T, f func(t *testing.T)) {
	t.Run("in-process", f)
	t.Run("isolated", func(t *testing.T) {
		documents.Isolate(true)
		defer documents.Isolate(false)
		f(t)
	})
}
