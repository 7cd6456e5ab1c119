package provider

import (
	"net/http"
	"time"
)

// OpenRouterName is the default Name of an OpenRouter provider, and the
// Served of its turns.
const OpenRouterName = "openrouter"

// DefaultOpenRouterBaseURL is the API root used when
// OpenRouterConfig.BaseURL is empty.
const DefaultOpenRouterBaseURL = "https://openrouter.ai/api/v1"

// OpenRouterConfig configures a client for OpenRouter, which speaks the
// OpenAI chat completions API. The zero value with APIKey set talks to
// openrouter.ai with the defaults below.
type OpenRouterConfig struct {
	// Name is the provider's Name and the Served of its turns. Default
	// "openrouter".
	Name string
	// APIKey is sent as the bearer token. Required; main reads it from
	// OPENROUTER_API_KEY.
	APIKey string
	// BaseURL is the API root that /chat/completions is appended to.
	// Default DefaultOpenRouterBaseURL, https://openrouter.ai/api/v1.
	BaseURL string
	// Model, when set, replaces the model named in every request
	// ("anthropic/claude-sonnet-4", "openai/gpt-4.1"). Default empty: the
	// request's Model is sent.
	Model string
	// Referer is sent as the HTTP-Referer header, the URL OpenRouter
	// attributes the calls to. Default empty: no header.
	Referer string
	// Title is sent as the X-Title header, the application name OpenRouter
	// shows for the calls. Default empty: no header.
	Title string
	// Headers are extra HTTP headers sent with every request, set after
	// the client's own, Referer and Title. Default none.
	Headers map[string]string
	// HTTPClient sends the requests; see OpenAIConfig.HTTPClient. Default
	// a client on http.DefaultTransport that follows no redirects.
	HTTPClient *http.Client
	// Timeout bounds one call, streamed or not. Default
	// DefaultOpenAITimeout, 600s. A shorter deadline on the context wins.
	Timeout time.Duration
}

// openAI returns the OpenAI client config that talks to OpenRouter as c
// says.
func (c OpenRouterConfig) openAI() OpenAIConfig {
	o := OpenAIConfig{
		Name:       c.Name,
		APIKey:     c.APIKey,
		BaseURL:    c.BaseURL,
		Model:      c.Model,
		HTTPClient: c.HTTPClient,
		Timeout:    c.Timeout,
	}
	if o.Name == "" {
		o.Name = OpenRouterName
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultOpenRouterBaseURL
	}
	o.Headers = make(map[string]string, len(c.Headers)+2)
	if c.Referer != "" {
		o.Headers[http.CanonicalHeaderKey("HTTP-Referer")] = c.Referer
	}
	if c.Title != "" {
		o.Headers[http.CanonicalHeaderKey("X-Title")] = c.Title
	}
	for k, v := range c.Headers {
		// Canonical names, so "http-referer" here replaces Referer.
		o.Headers[http.CanonicalHeaderKey(k)] = v
	}
	return o
}

// Validate checks the config. It returns a *protocol.Error: CodeMissingField
// when APIKey is empty, CodeInvalidField when BaseURL is not an absolute
// http(s) URL, Referer, Title or a header cannot be sent (the error names
// Headers), Name is blank but not empty, or Timeout is negative.
func (c OpenRouterConfig) Validate() error {
	return c.openAI().validate("OPENROUTER_API_KEY", DefaultOpenRouterBaseURL)
}

// NewOpenRouter returns an OpenAI client that talks to OpenRouter: the
// OpenAI chat completions client with OpenRouter's base URL, its
// attribution headers, and the name "openrouter". Its Complete and
// CompleteStream behave and fail as OpenAI's do. It returns cfg.Validate's
// error when the config is not usable; an empty APIKey is a
// CodeMissingField error saying to set OPENROUTER_API_KEY.
func NewOpenRouter(cfg OpenRouterConfig) (*OpenAI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newOpenAI(cfg.openAI()), nil
}
