// Package formats compiles in the document formats a build's tags ask
// for (xlsx, docx, pptx, pdf, barcode; documents for all five): each is a
// blank import behind its tag, and registers its operations and tools
// with package documents. The default build imports none of them, nor
// their dependencies.
package formats
