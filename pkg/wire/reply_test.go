package wire_test

import (
	"testing"

	"github.com/ioharness/harness/pkg/wire"
)

func TestReplyAllowed(t *testing.T) {
	for _, tt := range []struct {
		tenant, subject string
		want            bool
	}{
		{"", "_INBOX.abc", true},
		{"", "ci.answers.job-1", true},
		{"", "harness.submit", false},
		{"", "harness.trace.r1", false},
		{"", "$JS.API.STREAM.DELETE.HARNESS_TRACE", false},
		{"", "$KV.harness-runs.r1", false},
		{"", "a.*", false},
		{"", "a.>", false},
		{"", "a..b", false},
		{"", "", false},
		{"", "a b", false},
		{"acme", "_INBOX.acme.x", true},
		{"acme", "_INBOX.bravo.x", false},
		{"acme", "_INBOX.x", false},
		{"acme", "ci.answers", false},
		{"acme", "_INBOX.acme.", false},
	} {
		if got := wire.ReplyAllowed(tt.tenant, tt.subject); got != tt.want {
			t.Errorf("ReplyAllowed(%q, %q) = %v, want %v", tt.tenant, tt.subject, got, tt.want)
		}
	}
}
