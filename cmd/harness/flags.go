package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ioharness/harness"
)

// newFlags returns a flag set for a command whose --help prints the
// command's synopsis and flags.
func newFlags(env *environ, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: harness %s %s\n\n%s\n\nFlags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags placed anywhere among the positional arguments, and
// returns the positionals. It returns flag.ErrHelp for --help.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// exitForParse maps a flag parse error to an exit code.
func exitForParse(err error) int {
	if err == flag.ErrHelp {
		return exitOK
	}
	return exitUsage
}

// dataDir returns the data directory: the flag, $HARNESS_DATA, or the
// default.
func dataDir(env *environ, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if d := env.getenv("HARNESS_DATA"); d != "" {
		return d
	}
	if d := env.getenv("XDG_DATA_HOME"); d != "" {
		return d + "/harness"
	}
	return harness.DefaultDataDir()
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

func fail(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "harness: "+format+"\n", args...)
}
