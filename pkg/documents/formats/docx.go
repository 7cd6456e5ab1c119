//go:build docx || documents

package formats

import _ "github.com/ioharness/harness/pkg/documents/docx" // registers the docx tools
