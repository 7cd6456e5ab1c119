package provider

import "github.com/ioharness/harness/pkg/retry"

// RetryPolicy decides whether, and after how long, a failed provider call
// is tried again; it is retry.Policy, kept under this name for callers of
// this package.
type RetryPolicy = retry.Policy

// Defaults of RetryPolicy (retry.DefaultBase, DefaultMax, DefaultMaxRetries).
const (
	DefaultRetryBase       = retry.DefaultBase
	DefaultRetryMax        = retry.DefaultMax
	DefaultRetryMaxRetries = retry.DefaultMaxRetries
)
