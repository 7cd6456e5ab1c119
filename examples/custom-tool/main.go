// Command custom-tool is a sandboxer with one tool of its own beside the
// built-ins: word_count, which counts the words of a workspace file. It
// advertises the tool to the cluster (its micro service's metadata), and
// offers it to the runs whose contracts name it ("tools": ["word_count"]);
// a coordinator sends those runs to a sandboxer that has it, and refuses
// them before their first step when none does.
//
// The tool declares what its calls act on, a read of the file its "path"
// argument names, so a policy rule on that path decides it, and a person
// asked to approve a call sees the path, as for read_file. It reads
// through the tools.Env it is given, which judges every path the read
// passes through, symbolic links' targets included.
//
//	go build -o custom-sandboxer ./examples/custom-tool
//	./custom-sandboxer --nats nats://127.0.0.1:4222 --root /srv/work
package main

import (
	"github.com/ioharness/harness/examples/custom-tool/wordcount"
	"github.com/ioharness/harness/pkg/sandboxer/command"
)

func main() { command.Main(wordcount.Tool{}) }
