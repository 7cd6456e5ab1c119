//go:build barcode || documents

package formats

import _ "github.com/ioharness/harness/pkg/documents/barcode" // registers the barcode tools
