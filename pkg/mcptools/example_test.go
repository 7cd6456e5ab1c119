package mcptools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ioharness/harness/pkg/mcptools"
)

// An HTTP server's tools, offered under its name, and a call of one; every
// connection the client makes is put to the check first.
func ExampleHTTP() {
	type in struct {
		Text string `json:"text"`
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "example"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "shout", Description: "Say it louder."},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text + "!"}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()

	client := mcptools.Client(func(host, port string) error {
		return nil // the sandboxer asks the run's policy about net host:port here
	})
	s, err := mcptools.HTTP(context.Background(), "loud", srv.URL, client)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for _, t := range s.Tools() {
		fmt.Println(t.Name)
	}
	res, err := s.Call(context.Background(), "shout", json.RawMessage(`{"text":"hello"}`), 1024)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content)
	// Output:
	// mcp__loud__shout
	// hello!
}
