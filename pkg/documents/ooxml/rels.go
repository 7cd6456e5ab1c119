package ooxml

import (
	"io"
	"path"
	"strings"

	"github.com/ioharness/harness/pkg/documents"
)

// Rel is one relationship of a part.
type Rel struct {
	ID     string
	Type   string // a URI, "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles"
	Target string // a part name, resolved against the source and cleaned, unless External
	// External reports a target outside the package (TargetMode
	// "External"): a URL, kept as written.
	External bool
}

// Rels returns the relationships of the part source ("" for the package
// itself), by id and in the order they appear; of two of one id the first
// counts. A part with no relationships part has none. Errors are those
// of reading the relationships part as XML (XMLPart.Next).
func (p *Package) Rels(source string) (map[string]Rel, []Rel, error) {
	name := "_rels/.rels"
	if source != "" {
		name = path.Join(path.Dir(source), "_rels", path.Base(source)+".rels")
	}
	byID := map[string]Rel{}
	if !p.Has(name) {
		return byID, nil, nil
	}
	x, err := p.XML(name)
	if err != nil {
		return nil, nil, err
	}
	defer x.Close()
	var order []Rel
	for {
		e, err := x.NextStart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if e.Name.Local != "Relationship" {
			continue
		}
		r := Rel{ID: Attr(e, "Id"), Type: Attr(e, "Type"), External: strings.EqualFold(Attr(e, "TargetMode"), "External")}
		r.Target = Attr(e, "Target")
		if !r.External {
			r.Target = resolve(source, r.Target)
		}
		if _, dup := byID[r.ID]; !dup {
			byID[r.ID] = r
			order = append(order, r)
		}
	}
	return byID, order, nil
}

// resolve returns the part name a relationship of source targets: target
// taken from the root when it begins with "/", else from source's folder.
func resolve(source, target string) string {
	if strings.HasPrefix(target, "/") {
		return path.Clean(strings.TrimPrefix(target, "/"))
	}
	return strings.TrimPrefix(path.Join(path.Dir(source), target), "/")
}

// RelOfType returns the first relationship of rs, not an external one,
// whose type ends in "/"+suffix ("officeDocument"), so that both the
// transitional and the strict namespaces match.
func RelOfType(rs []Rel, suffix string) (Rel, bool) {
	for _, r := range rs {
		if !r.External && strings.HasSuffix(r.Type, "/"+suffix) {
			return r, true
		}
	}
	return Rel{}, false
}

// contentTypes is [Content_Types].xml: the media type of each part.
type contentTypes struct {
	defaults  map[string]string // by lower-cased extension
	overrides map[string]string // by lower-cased part name, no leading slash
}

// ContentType returns the media type [Content_Types].xml gives the part
// name (its Override, else its extension's Default), "" when it gives
// none. Errors: a documents.Errorf refusal of a package without
// [Content_Types].xml, and those of reading it as XML (XMLPart.Next).
func (p *Package) ContentType(name string) (string, error) {
	if err := p.loadTypes(); err != nil {
		return "", err
	}
	if t, ok := p.types.overrides[strings.ToLower(name)]; ok {
		return t, nil
	}
	return p.types.defaults[strings.ToLower(strings.TrimPrefix(path.Ext(name), "."))], nil
}

// loadTypes reads [Content_Types].xml once.
func (p *Package) loadTypes() error {
	if p.types != nil {
		return nil
	}
	ct, err := p.readContentTypes()
	if err != nil {
		return err
	}
	p.types = ct
	return nil
}

func (p *Package) readContentTypes() (*contentTypes, error) {
	const name = "[Content_Types].xml"
	if !p.Has(name) {
		return nil, documents.Errorf("the file is not %s: its zip has no [Content_Types].xml, so it is not an office document package", p.kind)
	}
	x, err := p.XML(name)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	ct := &contentTypes{defaults: map[string]string{}, overrides: map[string]string{}}
	for {
		e, err := x.NextStart()
		if err == io.EOF {
			return ct, nil
		}
		if err != nil {
			return nil, err
		}
		switch e.Name.Local {
		case "Default":
			ct.defaults[strings.ToLower(Attr(e, "Extension"))] = Attr(e, "ContentType")
		case "Override":
			ct.overrides[strings.ToLower(strings.TrimPrefix(Attr(e, "PartName"), "/"))] = Attr(e, "ContentType")
		}
	}
}

// MainPart returns the name of the package's main part, the target of its
// officeDocument relationship, whose media type must contain one of want
// ("wordprocessingml", "ms-word"). Errors: documents.Errorf refusals of a
// package without [Content_Types].xml, one whose _rels/.rels names no
// main part, and one whose main part is of another type (the message
// names the kind of file it is: "a spreadsheet"); and those of reading
// the package's XML (XMLPart.Next).
func (p *Package) MainPart(want ...string) (string, error) {
	if err := p.loadTypes(); err != nil {
		return "", err
	}
	_, rs, err := p.Rels("")
	if err != nil {
		return "", err
	}
	r, ok := RelOfType(rs, "officeDocument")
	if !ok {
		return "", documents.Errorf("the file is not %s: its package names no main document (_rels/.rels has no officeDocument relationship)", p.kind)
	}
	ct, err := p.ContentType(r.Target)
	if err != nil {
		return "", err
	}
	for _, w := range want {
		if strings.Contains(ct, w) {
			return r.Target, nil
		}
	}
	return "", documents.Errorf("the file is not %s: its main part %s is of type %q (%s); use the tool for that kind of file", p.kind, r.Target, ct, describeType(ct))
}

// describeType names the kind of office file a main part's media type
// belongs to.
func describeType(ct string) string {
	switch {
	case strings.Contains(ct, "spreadsheetml") || strings.Contains(ct, "ms-excel"):
		return "a spreadsheet"
	case strings.Contains(ct, "wordprocessingml") || strings.Contains(ct, "ms-word"):
		return "a Word document"
	case strings.Contains(ct, "presentationml") || strings.Contains(ct, "ms-powerpoint"):
		return "a presentation"
	case ct == "":
		return "no type declared"
	}
	return "another kind of document"
}
