package harness_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
	"github.com/ioharness/harness/pkg/tools"
	"github.com/ioharness/harness/pkg/worker"
)

var pngBytes = append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...)

func imageRun(t *testing.T, p worker.Provider) (*harness.Cluster, string, *protocol.Result) {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "shot.png"), pngBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	cl, err := harness.Start(t.Context(), harness.Config{AllowFloor: true, DataDir: t.TempDir(), Roots: []string{ws}, Provider: p, Tools: tools.BuiltinsWithImages()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	raw, _ := json.Marshal(&protocol.Contract{Schema: protocol.ContractSchema, Task: "describe shot.png", Workspace: protocol.Workspace{Root: ws},
		Verification: protocol.Verification{None: &struct{}{}}})
	res, err := clustertest.RunJSON(t.Context(), cl, raw, "img")
	if err != nil {
		t.Fatal(err)
	}
	return cl, ws, res
}

func lookAgent(seen **protocol.CompletionRequest) *provider.Scripted {
	return provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		if call == 1 {
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "v", Name: "view_image", Arguments: json.RawMessage(`{"path":"shot.png"}`)}}}, nil
		}
		*seen = req
		return &protocol.Turn{Text: "A blank picture."}, nil
	})
}

// TestViewImageReachesTheModel attaches an image to the next request, as
// a user message after the tool results, and keeps it out of the trace's
// records (by reference) while a resumed transcript still has it.
func TestViewImageReachesTheModel(t *testing.T) {
	var seen *protocol.CompletionRequest
	cl, _, res := imageRun(t, lookAgent(&seen))
	if res.Outcome != protocol.OutcomeFinished || seen == nil {
		t.Fatalf("run = %s (%s)", res.Outcome, res.Reason)
	}
	last := seen.Messages[len(seen.Messages)-1]
	if last.Role != protocol.RoleUser || len(last.Images) != 1 || last.Images[0].MediaType != "image/png" || len(last.Images[0].Data) != len(pngBytes) {
		t.Fatalf("the second request ends with %+v, want the image in a user message", last)
	}
	recs, err := cl.Run("img").Trace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if o := recs[1].Observations[0]; o.Image == nil || o.ImageRef == "" {
		t.Errorf("the traced observation = %+v, want the image kept by reference and read back", o)
	}
}

// noImages is a provider that does not take images.
type noImages struct{ calls int }

func (n *noImages) Name() string { return "text-only" }

func (n *noImages) Complete(_ context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	n.calls++
	return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "v", Name: "view_image", Arguments: json.RawMessage(`{"path":"shot.png"}`)}}}, nil
}

// TestImagesRefusedBeforeSpend ends a run whose provider does not take
// images when a request would carry one, without calling the provider.
func TestImagesRefusedBeforeSpend(t *testing.T) {
	p := &noImages{}
	_, _, res := imageRun(t, p)
	if res.Outcome != protocol.OutcomeEscalatedTerminal || !strings.Contains(res.Reason, "does not accept images") || p.calls != 1 {
		t.Errorf("run = %s (%s) after %d calls, want escalated_terminal after 1 call", res.Outcome, res.Reason, p.calls)
	}
}
