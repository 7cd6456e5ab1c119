package process

import "embed"

// Source is this package's code: a sandbox's init finds the program a
// command runs with LookPath, so the native backend counts it among the
// code an init must share with its sandboxer (the init's build).
//
//go:embed *.go
var Source embed.FS
