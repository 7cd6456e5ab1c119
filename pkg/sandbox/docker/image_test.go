//go:build linux

package docker_test

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"
)

// toolboxPrograms are the host programs copied into the test image, with
// the shared libraries they load: what the conformance suite and the
// docker tests run.
var toolboxPrograms = []string{
	"sh", "dash", "bash", "sleep", "env", "seq", "true", "false", "pwd", "cat",
	"tail", "head", "id", "ls", "touch", "mkdir", "rm", "echo", "cut", "tr", "setsid",
}

// rootfs is a root filesystem assembled from the host's files: each path
// keeps the symlinks it has on the host, so that binaries find their
// loader and libraries by the paths they were linked with.
type rootfs struct {
	entries map[string]*tar.Header // by name, relative to /
	sources map[string]string      // regular files: name -> host path
}

func newRootfs() *rootfs {
	r := &rootfs{entries: make(map[string]*tar.Header), sources: make(map[string]string)}
	for _, d := range []string{"tmp", "etc", "proc", "sys", "dev", "root"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		r.entries[d] = &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode}
	}
	r.entries["etc/passwd"] = &tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644}
	return r
}

// add copies host path p into the image, with the symlinks that lead to
// it and, for an ELF binary, its loader and libraries.
func (r *rootfs) add(p string) error {
	p = filepath.Clean(p)
	if p == "/" {
		return nil
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return err
	}
	if err := r.add(filepath.Dir(p)); err != nil {
		return err
	}
	host := filepath.Join(parent, filepath.Base(p))
	name := strings.TrimPrefix(host, "/")
	if _, ok := r.entries[name]; ok {
		return nil
	}
	fi, err := os.Lstat(host)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return err
		}
		r.entries[name] = &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}
		if !filepath.IsAbs(target) {
			target = filepath.Join(parent, target)
		}
		return r.add(target)
	case fi.IsDir():
		r.entries[name] = &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755}
		return nil
	case fi.Mode().IsRegular():
		r.entries[name] = &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size()}
		r.sources[name] = host
		return r.addELFDeps(host)
	default:
		return fmt.Errorf("%s: not a file, directory or symlink", host)
	}
}

// addELFDeps adds the loader and the libraries that the ELF file at host
// needs; a file that is not ELF needs nothing.
func (r *rootfs) addELFDeps(host string) error {
	f, err := elf.Open(host)
	if err != nil {
		return nil // not ELF
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return err
			}
			if err := r.add(strings.TrimRight(string(b), "\x00")); err != nil {
				return err
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	dirs, _ := filepath.Glob("/lib/*-linux-gnu")
	more, _ := filepath.Glob("/usr/lib/*-linux-gnu")
	dirs = append(append(dirs, more...), "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	for _, lib := range libs {
		found := false
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				if err := r.add(filepath.Join(d, lib)); err != nil {
					return err
				}
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s needs %s, which is not in %q", host, lib, dirs)
		}
	}
	return nil
}

// writeTar writes the root filesystem as a tar stream, parents first.
func (r *rootfs) writeTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		h := r.entries[n]
		var body []byte
		if src, ok := r.sources[n]; ok {
			b, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			body = b
		} else if n == "etc/passwd" {
			body = []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")
		}
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// buildTestImage assembles a small image from the host's shell, coreutils
// and bash (and their libraries), imports it into the engine under a fresh
// name, and removes it when tb ends. Nothing is pulled.
func buildTestImage(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	r := newRootfs()
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if _, err := os.Lstat(d); err == nil {
			if err := r.add(d); err != nil {
				tb.Fatalf("add %s to the test image: %v", d, err)
			}
		}
	}
	for _, prog := range toolboxPrograms {
		path := ""
		for _, d := range []string{"/usr/bin", "/bin"} {
			if _, err := os.Stat(filepath.Join(d, prog)); err == nil {
				path = filepath.Join(d, prog)
				break
			}
		}
		if path == "" {
			tb.Fatalf("the host has no %s in /usr/bin or /bin to build the test image from", prog)
		}
		if err := r.add(path); err != nil {
			tb.Fatalf("add %s to the test image: %v", path, err)
		}
	}
	ref := "harness-sandboxtest:" + strings.ToLower(rand.Text()[:12])
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(r.writeTar(pw)) }()
	ctx := context.Background()
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		pr.Close()
		tb.Fatalf("import the test image: %v", err)
	}
	defer resp.Close()
	if err := readProgress(resp); err != nil {
		tb.Fatalf("import the test image: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			tb.Errorf("remove the test image %s: %v", ref, err)
		}
	})
	return ref
}

// readProgress reads the engine's JSON progress stream to its end and
// returns the error it reports, if any.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}
