package documents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// Limits bound one document operation against hostile files: a zip bomb,
// XML nested without end, an image of a billion pixels, a parse that
// never ends.
type Limits struct {
	// MaxFileBytes is the largest file an operation reads or writes.
	MaxFileBytes int
	// MaxExpandedBytes is the most an archive's members (the parts of an
	// xlsx, docx or pptx) may hold once decompressed, together.
	MaxExpandedBytes int64
	// MaxEntries is the most members an archive may have.
	MaxEntries int
	// MaxXMLDepth is the deepest an XML part may nest.
	MaxXMLDepth int
	// MaxPixels is the largest image, width times height, decoded.
	MaxPixels int
	// MaxTextChars is the most characters of text an operation returns.
	MaxTextChars int
	// Timeout bounds one operation's time.
	Timeout time.Duration
	// MemoryBytes bounds an isolated operation's writable memory (its
	// data limit: the heap and the stacks).
	MemoryBytes uint64
}

// DefaultLimits are the limits of every operation.
var DefaultLimits = Limits{
	MaxFileBytes:     32 << 20,
	MaxExpandedBytes: 256 << 20,
	MaxEntries:       10_000,
	MaxXMLDepth:      256,
	MaxPixels:        40_000_000,
	MaxTextChars:     1 << 20,
	Timeout:          20 * time.Second,
	MemoryBytes:      2 << 30,
}

// isolate says operations run in a child process (see Isolate).
var isolate atomic.Bool

// Isolate makes every later Call run its operation in a child process of
// this binary, under Limits.MemoryBytes of writable memory and the
// operation's time in CPU seconds, so a file that exhausts the parser
// kills the child, never the sandboxer holding other runs' workspaces.
// The binary must call RunChildIfRequested first thing in main (the
// sandboxer's command.Main does). In a build with the race detector the
// child has no memory limit (the detector's shadow memory cannot be
// mapped under one); its time and CPU limits hold.
func Isolate(on bool) { isolate.Store(on) }

// childEnv marks the process as a document operation's child.
const childEnv = "HARNESS_DOCUMENT_OPERATION"

// request is what a child is given on its standard input.
type request struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
	In   []byte          `json:"in,omitempty"`
}

// response is what a child writes on its standard output.
type response struct {
	Result *Result         `json:"result,omitempty"`
	Error  *protocol.Error `json:"error,omitempty"`
}

// Call runs the operation name on in, under DefaultLimits. A file over
// the size limit is refused before the operation sees it; one that takes
// longer than the limit is abandoned, saying so.
func Call(ctx context.Context, name string, args json.RawMessage, in []byte) (*Result, error) {
	lim := DefaultLimits
	if len(in) > lim.MaxFileBytes {
		return nil, errTooLarge(len(in), lim.MaxFileBytes)
	}
	f, err := lookup(name)
	if err != nil {
		return nil, err
	}
	var res *Result
	if isolate.Load() {
		res, err = callChild(ctx, name, args, in, lim)
	} else {
		res, err = callHere(ctx, name, f, args, in, lim)
	}
	if err != nil {
		return nil, err
	}
	if len(res.File) > lim.MaxFileBytes {
		return nil, errTooLarge(len(res.File), lim.MaxFileBytes)
	}
	return res, nil
}

// callHere runs f in this process, abandoning it at the time limit.
func callHere(ctx context.Context, name string, f Func, args json.RawMessage, in []byte, lim Limits) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: protocol.Errorf(protocol.CodeBadArguments, "%s could not read the file: the parser failed (%v); the file is damaged or not of this kind", name, p)}
			}
		}()
		res, err := f(ctx, args, in)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			return nil, describe(name, o.err)
		}
		if o.res == nil {
			o.res = &Result{}
		}
		return o.res, nil
	case <-ctx.Done():
		return nil, timedOut(name, lim, ctx)
	}
}

func timedOut(name string, lim Limits, ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return protocol.Errorf(protocol.CodeBadArguments, "%s took longer than the document tools' limit of %s and was stopped; the file may be built to exhaust a parser", name, lim.Timeout)
	}
	return fmt.Errorf("%s: %w", name, ctx.Err())
}

// callChild runs the operation in a child process of this binary.
func callChild(ctx context.Context, name string, args json.RawMessage, in []byte, lim Limits) (*Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "the document tools cannot find their own binary: %v", err)
	}
	req, err := json.Marshal(request{Name: name, Args: args, In: in})
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "encode the document operation: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = []string{childEnv + "=1", fmt.Sprintf("%s_LIMITS=%d,%d", childEnv, lim.MemoryBytes, int(lim.Timeout.Seconds())+1)}
	cmd.Stdin = bytes.NewReader(req)
	var out, errOut bytes.Buffer
	// The answer holds at most a file's bytes, base64, and its text; what
	// goes past that is not an answer.
	cmd.Stdout = &limitedWriter{w: &out, n: 2*lim.MaxFileBytes + 4*lim.MaxTextChars + 1<<20}
	cmd.Stderr = &limitedWriter{w: &errOut, n: 4096}
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = time.Second // a grandchild holding the pipes does not hold the call
	err = cmd.Run()
	if ctx.Err() != nil {
		return nil, timedOut(name, lim, ctx)
	}
	var resp response
	if jerr := json.Unmarshal(out.Bytes(), &resp); jerr != nil || (resp.Result == nil && resp.Error == nil) {
		why := "it ended without an answer"
		if err != nil {
			why = err.Error()
		}
		return nil, protocol.Errorf(protocol.CodeBadArguments, "%s could not read the file: its process was stopped (%s) within the document tools' limits (%d MiB of memory, %s); the file is damaged or built to exhaust a parser", name, why, lim.MemoryBytes>>20, lim.Timeout)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

// RunChildIfRequested turns the process into a document operation's
// child when it was started as one: it takes its limits, runs the
// operation its standard input names, writes the answer and exits. It
// returns at once in any other process.
func RunChildIfRequested() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	// Not to be read or traced by a command of the same user (a floor
	// sandbox's) while it holds a run's document.
	hideChild()
	var mem uint64
	var cpu uint64
	fmt.Sscanf(os.Getenv(childEnv+"_LIMITS"), "%d,%d", &mem, &cpu)
	if mem > 0 && !raceBuild {
		// The data limit, not the address space's: a Go process reserves
		// more than a gigabyte of address space it never touches before
		// main, so an address-space limit of a few hundred megabytes left
		// it no room for a thread's stack. The data limit counts what is
		// mapped writable: the heap as it grows, and the stacks.
		_ = syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: mem, Max: mem})
	}
	if cpu > 0 {
		_ = syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu})
	}
	os.Exit(child(os.Stdin, os.Stdout))
}

// child runs one request from r and writes its response to w.
func child(r io.Reader, w io.Writer) int {
	var req request
	if err := json.NewDecoder(io.LimitReader(r, int64(DefaultLimits.MaxFileBytes)*2+1<<20)).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "documents: bad request:", err)
		return 2
	}
	var resp response
	f, err := lookup(req.Name)
	if err == nil {
		resp.Result, err = callHere(context.Background(), req.Name, f, req.Args, req.In, DefaultLimits)
	}
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			pe = protocol.Errorf(protocol.CodeBadArguments, "%s: %v", req.Name, err)
		}
		resp.Error = pe
	}
	if err := json.NewEncoder(w).Encode(resp); err != nil {
		return 1
	}
	return 0
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}
