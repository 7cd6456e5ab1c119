package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// allowedEnv is every host variable a command may see. It covers what a
// shell, a locale-aware tool and a Go build need, and nothing else: no
// credentials, no proxies, no provider or cloud keys.
var allowedEnv = []string{
	"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM",
	"GOPATH", "GOCACHE", "GOMODCACHE", "GOROOT", "GOFLAGS", "GOTOOLCHAIN",
	"GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOINSECURE",
	"CGO_ENABLED",
}

// MinimalEnv returns the environment commands run with: the sandboxer's own
// values of an allowlist, and nothing else, so that API keys, tokens and
// other secrets in the sandboxer's environment never reach a command.
//
// The allowlist is PATH, HOME, USER, LANG, LC_ALL, TZ, TMPDIR, TERM, and
// the variables a Go build reads: GOPATH, GOCACHE, GOMODCACHE, GOROOT,
// GOFLAGS, GOTOOLCHAIN, GOPROXY, GOSUMDB, GONOSUMDB, GOPRIVATE, GONOPROXY,
// GOINSECURE and CGO_ENABLED. Unset variables are left out. GOCACHE, when
// unset, is a directory under the temporary directory, which every backend
// lets a command write (Go's default, under HOME, may not be). If HOME is
// unset it is set to os.TempDir(), so that tools such as go find a cache
// directory. Note that a GOPROXY URL carrying credentials would be passed
// on; keep credentials for module proxies in .netrc, not in GOPROXY.
//
// extra entries ("KEY=value") are appended and override an allowlisted
// value of the same key; they are the caller's deliberate additions.
// Entries of extra without "=" are ignored. The result has each key once.
func MinimalEnv(extra ...string) []string {
	vals := make(map[string]string, len(allowedEnv)+len(extra))
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, k := range allowedEnv {
		if v, ok := os.LookupEnv(k); ok {
			set(k, v)
		}
	}
	if _, ok := vals["HOME"]; !ok {
		set("HOME", os.TempDir())
	}
	if _, ok := vals["GOCACHE"]; !ok {
		// Go's default cache is under HOME, which a sandbox may not show
		// or let write; a temporary directory is writable in every backend.
		set("GOCACHE", filepath.Join(os.TempDir(), "harness-gocache"))
	}
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		set(k, v)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env
}
