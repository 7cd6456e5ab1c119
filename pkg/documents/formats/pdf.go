//go:build pdf || documents

package formats

import _ "github.com/ioharness/harness/pkg/documents/pdf" // registers the pdf tools
