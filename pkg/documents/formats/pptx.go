//go:build pptx || documents

package formats

import _ "github.com/ioharness/harness/pkg/documents/pptx" // registers the pptx tools
