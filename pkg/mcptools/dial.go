package mcptools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// dialTimeout bounds one connection to an HTTP server.
const dialTimeout = 10 * time.Second

// Client returns the HTTP client an HTTP server is dialled with: every
// connection it makes is first put to check, with the host and port the
// URL names (never a proxy's: none is used, whatever the environment
// says), and a redirect is refused, so the client reaches no host check
// did not allow. check returns why a connection is refused, or nil.
func Client(check func(host, port string) error) *http.Client {
	d := &net.Dialer{Timeout: dialTimeout}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if err := check(host, port); err != nil {
				return nil, err
			}
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: dialTimeout,
		MaxIdleConnsPerHost: 4,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("the MCP server redirected to %s: %w", req.URL.Redacted(), errRedirect)
	}}
}

// errRedirect is why a redirect is not followed: the URL the contract
// names is the server, and where it sends the client was not checked.
var errRedirect = errors.New("redirects are not followed")
