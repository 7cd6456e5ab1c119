package provider

import "testing"

func TestEndpoints(t *testing.T) {
	o, err := NewOpenAI(OpenAIConfig{APIKey: "k", Model: "m", BaseURL: "http://127.0.0.1:8080/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Endpoints(); len(got) != 1 || got[0] != "127.0.0.1:8080" {
		t.Errorf("OpenAI endpoints = %v", got)
	}
	d, err := NewOpenAI(OpenAIConfig{APIKey: "k", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Endpoints(); got[0] != "api.openai.com:443" {
		t.Errorf("default OpenAI endpoints = %v", got)
	}
	a, err := NewAnthropic(AnthropicConfig{APIKey: "k", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Endpoints(); got[0] != "api.anthropic.com:443" {
		t.Errorf("Anthropic endpoints = %v", got)
	}
}
