// Package snapshot carries a workspace to another machine and its changes
// back: Pack writes a directory as an archive (a gzip-compressed tar),
// Unpack materialises an archive into a new directory, Diff compares two
// directories as a unified diff, and Apply applies such a diff to a
// directory.
//
// Every archive and every patch is treated as hostile. Unpack refuses
// absolute paths, paths that climb out with "..", entries beneath a
// symbolic link, symbolic links whose target leaves the directory or
// passes through another link, hard links, devices, FIFOs and sockets, and
// archives over the Limits; Pack leaves out (and lists in Info.LeftOut)
// the links Unpack would refuse and every file with more than one hard
// link, and refuses the rest of what Unpack would, so a snapshot that
// uploads also materialises and carries nothing a link could reach from
// outside. Apply refuses paths outside its directory, paths that lead
// through a symbolic link, and anything under .git, and writes nothing
// unless every change applies. Each refusal is a *protocol.Error
// (protocol.ErrPathEscape, ErrTooLarge, ErrUnsupported, ErrMalformed) that
// names the entry.
//
// The caller's steps: on the submitting side, Pack into a file or buffer
// and store it under Ref of its bytes; on the sandboxer, check the bytes
// against the ref, Unpack twice (a base kept aside and the workspace the
// run changes), and when the run ends, Diff the base against the workspace;
// back on the submitting side, Apply the diff to a copy of the directory.
package snapshot
