// Package documents holds the document tools of the builds that ask for
// them: spreadsheets, Word documents, presentations, PDFs and barcodes,
// each behind its build tag (xlsx, docx, pptx, pdf, barcode; documents
// for all five). The default build compiles none of them and none of
// their dependencies.
//
// A format's package registers its operations here (Register), each a
// function of a file's bytes and the call's arguments; its tools read
// the file through the tools.Env they are given (judged on the real path,
// links by their target), run the operation through Call, and write what
// it produced through the Env again. Call bounds each operation by the
// Limits against hostile files, and runs it in a child process with its
// own memory and CPU limits where the binary allows (Isolate).
package documents

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// Result is what an operation produced: text for the model, a file's new
// bytes, or both.
type Result struct {
	Text string `json:"text,omitempty"`
	File []byte `json:"file,omitempty"`
}

// Func is one operation: it reads in, a file's bytes (nil when it makes a
// new file), under the call's arguments. An error is a
// *protocol.Error the model reads.
type Func func(ctx context.Context, args json.RawMessage, in []byte) (*Result, error)

// Format is a document kind a build holds: its tag, its tools, and the
// name of the operation that extracts its text (for document_contains).
type Format struct {
	// Tag is the build tag that compiles it in.
	Tag string
	// Extensions are the file name endings it reads (".xlsx").
	Extensions []string
	// Text is the registered operation that returns a file's text, or ""
	// (a format with nothing to search, such as an image's barcodes, uses
	// its decoded text).
	Text string
	// Tools are its tools.
	Tools []tools.Tool
}

var (
	mu      sync.RWMutex
	funcs   = map[string]Func{}
	formats []Format
)

// Register adds the operation name (a format's "xlsx.read"). It is called
// from a format package's init; a name registered twice panics.
func Register(name string, f Func) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := funcs[name]; ok {
		panic("documents: operation " + name + " registered twice")
	}
	funcs[name] = f
}

// AddFormat adds a format's tools and text operation, from its package's
// init.
func AddFormat(f Format) {
	mu.Lock()
	defer mu.Unlock()
	formats = append(formats, f)
	slices.SortFunc(formats, func(a, b Format) int {
		if a.Tag < b.Tag {
			return -1
		}
		if a.Tag > b.Tag {
			return 1
		}
		return 0
	})
}

// Formats returns the formats this build holds, by tag.
func Formats() []Format {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Clone(formats)
}

// Tools returns the document tools this build holds.
func Tools() []tools.Tool {
	var ts []tools.Tool
	for _, f := range Formats() {
		ts = append(ts, f.Tools...)
	}
	return ts
}

// lookup returns the operation called name.
func lookup(name string) (Func, error) {
	mu.RLock()
	f, ok := funcs[name]
	mu.RUnlock()
	if !ok {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "the document operation %s is not in this build", name)
	}
	return f, nil
}

// errTooLarge is the refusal of an input over Limits.MaxFileBytes.
func errTooLarge(n, max int) error {
	return protocol.Errorf(protocol.CodeBadArguments, "the file is %d bytes, over the document tools' limit of %d; work on a smaller file", n, max)
}

// Errorf is a document operation's refusal of its input: a file that is
// not what it claims, or over a limit.
func Errorf(format string, a ...any) error {
	return protocol.Errorf(protocol.CodeBadArguments, format, a...)
}

// describe names an operation's failure for the model.
func describe(name string, err error) error {
	if _, ok := err.(*protocol.Error); ok {
		return err
	}
	return protocol.Errorf(protocol.CodeBadArguments, "%s: %v", name, err)
}

// Holds reports whether this build holds the format of tag.
func Holds(tag string) bool {
	for _, f := range Formats() {
		if f.Tag == tag {
			return true
		}
	}
	return false
}

// Tags are the tags of the formats this build holds, in order.
func Tags() []string {
	var tags []string
	for _, f := range Formats() {
		tags = append(tags, f.Tag)
	}
	return tags
}

// Text returns the text of a document of the format tag, for the
// contract's document_contains: an error, never an empty text, when the
// file is not of that kind or cannot be read.
func Text(ctx context.Context, tag string, data []byte) (string, error) {
	for _, f := range Formats() {
		if f.Tag == tag && f.Text != "" {
			res, err := Call(ctx, f.Text, nil, data)
			if err != nil {
				return "", err
			}
			return res.Text, nil
		}
	}
	return "", protocol.Errorf(protocol.CodeUnsupported, "this build has no %s document tools; build it with -tags %s (or -tags documents)", tag, tag)
}

// TagOf returns the build tag of the document tool called name, or "" for
// a name that is not one.
func TagOf(name string) string { return tools.DocumentTag(name) }
