// Command worker is the custom-tool example's worker: a harness worker
// with one tool of its own, convert_units, which needs no workspace. It
// advertises the tool to the cluster (its micro service's metadata, and
// the tool's spec on its endpoint, harness.worker.tool.convert_units) and
// serves it to the runs whose contracts name it ("tools":
// ["convert_units"]); their coordinators send its calls to the workers
// holding it, under the run's policy like any other call.
//
//	go build -o custom-worker ./examples/custom-tool/worker
//	./custom-worker --nats nats://127.0.0.1:4222
package main

import (
	"github.com/ioharness/harness/examples/custom-tool/convert"
	"github.com/ioharness/harness/pkg/worker/command"
)

func main() { command.Main(convert.Tool{}) }
