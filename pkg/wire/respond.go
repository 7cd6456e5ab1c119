package wire

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// RespondLater answers a micro service request from a goroutine other
// than its handler's, once the handler has returned: micro.Request's
// Respond and Error may not be called then, since the service reads what
// Error records as soon as the handler returns. A non-empty code answers
// with the service's error headers, as Error does (micro's own stats do
// not count it: a service that answers later counts its errors itself).
// A request with no reply subject is answered by nothing.
func RespondLater(nc *nats.Conn, r micro.Request, data []byte, code, description string) error {
	if r.Reply() == "" {
		return nil
	}
	m := &nats.Msg{Subject: r.Reply(), Data: data}
	if code != "" {
		m.Header = nats.Header{micro.ErrorHeader: []string{description}, micro.ErrorCodeHeader: []string{code}}
	}
	return nc.PublishMsg(m)
}
