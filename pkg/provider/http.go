package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ioharness/harness/pkg/protocol"
)

// checkCommon checks the config fields every HTTP client shares. It returns
// a *protocol.Error with CodeInvalidField naming the field: a Name that is
// blank but not empty, a BaseURL that is not an absolute http(s) URL
// (defaultURL is shown as an example), a header that cannot be sent, or a
// negative Timeout.
func checkCommon(name, baseURL, defaultURL string, headers map[string]string, timeout time.Duration) error {
	if name != "" && strings.TrimSpace(name) == "" {
		return protocol.FieldError(protocol.CodeInvalidField, "Name",
			"leave it empty for the default, or give a word such as \"openai-backup\"",
			"provider name %q is blank", name)
	}
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return protocol.FieldError(protocol.CodeInvalidField, "BaseURL",
				"give an absolute URL such as "+defaultURL,
				"base URL %q is not an http or https URL", baseURL)
		}
	}
	for k, v := range headers {
		if !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
			return protocol.FieldError(protocol.CodeInvalidField, "Headers",
				"use a token for the name and no line breaks in the value",
				"header %q cannot be sent", k)
		}
	}
	if timeout < 0 {
		return protocol.FieldError(protocol.CodeInvalidField, "Timeout",
			"use a positive duration, or zero for 600s",
			"timeout is negative")
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// httpClient returns a copy of hc (or of the zero client when hc is nil)
// that does not follow redirects unless hc says how to.
func httpClient(hc *http.Client) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	if c.CheckRedirect == nil {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

// headerOf returns headers as an http.Header with canonical names.
func headerOf(headers map[string]string) http.Header {
	h := make(http.Header, len(headers))
	for k, v := range headers {
		h.Set(k, v)
	}
	return h
}

func redirectMessage(status int, h http.Header) string {
	loc := ""
	if h != nil {
		loc = h.Get("Location")
	}
	return fmt.Sprintf("the endpoint redirected (HTTP %d to %q); redirects are not followed, so set the base URL to the final address", status, loc)
}

// cause returns why a call whose context is ctx failed with err: ctx's own
// error once ctx is done (the deadline passed, or the caller cancelled),
// since the HTTP stack may report that as any read error; err otherwise.
func cause(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
