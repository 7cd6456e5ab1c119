package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ioharness/harness"
	"github.com/ioharness/harness/internal/clustertest"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/provider"
)

// TestTaskImages attaches an image to a task: a model that takes images
// sees it on the task, the first message, in every request; a provider
// that takes none refuses the run's first call before it is made.
func TestTaskImages(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 3))); err != nil {
		t.Fatal(err)
	}
	img := protocol.Image{MediaType: "image/png", Data: buf.Bytes()}
	var seen, calls atomic.Int32
	agent := provider.NewScriptedFunc(func(req *protocol.CompletionRequest, call int) (*protocol.Turn, error) {
		n := calls.Add(1)
		if im := req.Messages[0].Images; len(im) == 1 && bytes.Equal(im[0].Data, img.Data) && im[0].MediaType == "image/png" {
			seen.Add(1)
		}
		if n == 1 {
			return &protocol.Turn{ToolCalls: []protocol.ToolCall{{ID: "l", Name: "find", Arguments: []byte(`{"name_glob":"*"}`)}}}, nil
		}
		return &protocol.Turn{Text: "a grey rectangle"}, nil
	})
	ws := t.TempDir()
	c := contract(ws)
	c.Schema, c.Task, c.Images = protocol.ContractSchema, "say what the image shows", []protocol.Image{img}
	if _, err := protocol.DecodeContract(mustJSON(t, c)); err != nil {
		t.Fatalf("a contract with a PNG attached: %v", err)
	}

	cl := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: agent, NoTakeover: true})
	h, err := cl.Submit(t.Context(), c, harness.WithRunID("seen"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != protocol.OutcomeFinished || seen.Load() != 2 || calls.Load() != 2 {
		t.Fatalf("run with an image = %s (%s); the image was on the task in %d of %d requests, want finished and 2 of 2", res.Outcome, res.Reason, seen.Load(), calls.Load())
	}

	calls.Store(0)
	blind := clustertest.Start(t, harness.Config{Roots: []string{ws}, Provider: textOnly{agent}, NoTakeover: true})
	h, err = blind.Submit(t.Context(), c, harness.WithRunID("blind"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err = h.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res.Outcome == protocol.OutcomeFinished || !strings.Contains(res.Reason, "does not accept images") || calls.Load() != 0 {
		t.Fatalf("run with an image on a text-only provider = %s (%s) after %d calls, want refused before any call, naming images", res.Outcome, res.Reason, calls.Load())
	}
}

// textOnly is a provider that takes no images.
type textOnly struct{ p *provider.Scripted }

func (t textOnly) Name() string { return "text-only" }
func (t textOnly) Complete(ctx context.Context, req *protocol.CompletionRequest) (*protocol.Turn, error) {
	return t.p.Complete(ctx, req)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
