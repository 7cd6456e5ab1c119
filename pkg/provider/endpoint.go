package provider

import (
	"net"
	"net/url"
)

// endpointOf returns the host:port a base URL dials, the port filled in
// from the scheme when the URL leaves it out.
func endpointOf(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return base
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "443"
	if u.Scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}
