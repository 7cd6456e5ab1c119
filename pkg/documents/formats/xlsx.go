//go:build xlsx || documents

package formats

import _ "github.com/ioharness/harness/pkg/documents/xlsx" // registers the xlsx tools
