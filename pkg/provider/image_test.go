package provider

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// TestImagesOnTheWire checks each vendor's request carries an image the
// way its API takes it: an image_url data URL content part for OpenAI, an
// image block with base64 source for Anthropic.
func TestImagesOnTheWire(t *testing.T) {
	img := protocol.Image{MediaType: "image/png", Data: []byte("\x89PNG fake")}
	req := &protocol.CompletionRequest{Model: "m", System: "s", MaxOutputTokens: 10, Messages: []protocol.Message{
		{Role: protocol.RoleUser, Content: "look", Images: []protocol.Image{img}}}}
	want := base64.StdEncoding.EncodeToString(img.Data)

	var body []byte
	capture := func(reply string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ = io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(reply))
		}))
	}
	oa := capture(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	defer oa.Close()
	o, err := NewOpenAI(OpenAIConfig{APIKey: "k", BaseURL: oa.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	var oreq struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &oreq); err != nil {
		t.Fatal(err)
	}
	if c := string(oreq.Messages[1].Content); !strings.Contains(c, `"image_url"`) || !strings.Contains(c, "data:image/png;base64,"+want) || !strings.Contains(c, `"look"`) {
		t.Errorf("OpenAI user content = %s, want the text and an image_url data URL", c)
	}

	an := capture(`{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	defer an.Close()
	a, err := NewAnthropic(AnthropicConfig{APIKey: "k", BaseURL: an.URL, Model: "m", NoPromptCache: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+want+`"}}`) {
		t.Errorf("Anthropic request = %s, want an image block", body)
	}
}
