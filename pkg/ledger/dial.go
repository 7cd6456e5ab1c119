package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Dial returns the ledger a role's configuration names: a Redis ledger at
// url (redis://[user:password@]host:port/db, or rediss:// for TLS, as
// REDIS_URL gives it), or a Memory ledger when url is empty. It pings the
// server once so a wrong address or password is reported at start, with
// the password never in the message; after that an unreachable server
// makes draws fail closed (protocol.ErrUnavailable) until it returns. The
// returned close releases the client.
func Dial(ctx context.Context, url string, cfg RedisConfig) (Ledger, func() error, error) {
	if url == "" {
		return NewMemory(), func() error { return nil }, nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: REDIS_URL is not a Redis URL (redis://[user:password@]host:port/db): %s", redact(err.Error(), url))
	}
	// Short timeouts: a draw that cannot reach Redis waits and retries
	// in the coordinator, which reports why, rather than hanging here.
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	opts.MaxRetries = 1
	client := redis.NewClient(opts)
	l, err := NewRedis(client, cfg)
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("ledger: Redis at %s did not answer: %s (check REDIS_URL, the server and its password)", opts.Addr, redact(err.Error(), url))
	}
	return l, client.Close, nil
}

// redact removes a URL's password from a message.
func redact(msg, url string) string {
	if opts, err := redis.ParseURL(url); err == nil && opts.Password != "" {
		msg = strings.ReplaceAll(msg, opts.Password, "****")
	}
	return msg
}
