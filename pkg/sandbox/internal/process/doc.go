// Package process is what the sandbox backends share about the process of
// a command: finding its program on the PATH of its own environment, the
// errors of a start that failed, how long to wait for its output once it
// has ended, and the CPU time of a process not reaped yet.
//
// It is internal to the sandbox packages: its errors are worded for the
// model that reads them, as sandbox.Backend documents them, and its names
// are not part of any backend's API.
package process
