package harness_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// Read a cluster as the web console does: with a user of its own that may
// read the runs and decide, and creates nothing (ConsolePermissions).
func ExampleCluster_ConsoleClient() {
	dir, _ := os.MkdirTemp("", "harness-example-")
	defer os.RemoveAll(dir)
	cl, err := harness.Start(context.Background(), harness.Config{DataDir: dir, Roots: []string{dir},
		Provider: provider.NewScripted(&protocol.Turn{Text: "nothing to do"})})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	c, err := cl.ConsoleClient(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	runs, err := c.Runs(context.Background())
	fmt.Println(len(runs), "runs", err)
	user, _ := cl.ConsoleCredentials()
	fmt.Println("as", user)
	// Output:
	// 0 runs <nil>
	// as console
}
