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
// OpenAI chat completions API with extras of its own: a unified reasoning
// parameter, reasoning text on the message, the call's cost and cache
// writes in the usage, and errors in answers that came with 200 (see
// NewOpenRouter). The zero value with APIKey set talks to openrouter.ai
// with the defaults below.
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
// CompleteStream behave and fail as OpenAI's do, with OpenRouter's
// dialect:
//
//   - A request's reasoning is sent as OpenRouter's unified reasoning
//     object, never as reasoning_effort: {"max_tokens": ThinkingBudget}
//     when the request has a thinking budget, {"effort": ReasoningEffort}
//     otherwise, nothing when it has neither.
//   - The answer's message.reasoning (delta.reasoning when streamed)
//     becomes the turn's one Thinking block of kind
//     protocol.ThinkingSummary; it is not sent back with the turn, as
//     go-openai's request message cannot carry it.
//   - usage.cost becomes Usage.ReportedCost and
//     prompt_tokens_details.cache_write_tokens Usage.CacheWriteTokens.
//   - An error object in a body or chunk that came with 200, or on a
//     choice, ({"error": {"code": 429, "message": ...}}) fails the call
//     as the same code sent as an HTTP status would.
//   - A stream whose one choice is numbered other than 0 is read as that
//     choice.
//
// Complete and CompleteStream read these extras from any server's answer;
// only the reasoning request is OpenRouter's alone. It returns
// cfg.Validate's error when the config is not usable; an empty APIKey is a
// CodeMissingField error saying to set OPENROUTER_API_KEY.
func NewOpenRouter(cfg OpenRouterConfig) (*OpenAI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := newOpenAI(cfg.openAI())
	o.openRouter = true
	return o, nil
}
