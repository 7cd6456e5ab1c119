//go:build pdf || documents

package pdf

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	pdffont "github.com/pdfcpu/pdfcpu/pkg/font"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
	"golang.org/x/text/encoding/charmap"

	"github.com/ioharness/harness/pkg/documents"
)

// Field is one fillable AcroForm field.
type Field struct {
	// Name is its fully qualified name, its ancestors' partial names and
	// its own joined by ".".
	Name string `json:"name"`
	// Type is text, checkbox, radio or choice.
	Type string `json:"type"`
	// Value is what it holds: a text field's or choice's text, a check
	// box's or radio group's state name ("Off" when none is chosen).
	Value string `json:"value"`
	// Options are a choice's export values, or the names of the states a
	// check box or radio group turns on.
	Options []string `json:"options,omitempty"`
	// ReadOnly says the form forbids changing it.
	ReadOnly bool `json:"read_only,omitempty"`

	dict     types.Dict
	widgets  []widget
	displays []string // a choice's display texts, by option
	maxLen   int
	flags    int
	da       string
}

// widget is one place on a page where a field shows.
type widget struct {
	dict types.Dict
	on   string // the state it turns on, for a button; "" for none
}

// The field flags of PDF 32000-1:2008, 12.7.3.1 and 12.7.4.
const (
	flagReadOnly    = 1 << 0
	flagMultiline   = 1 << 12
	flagRadio       = 1 << 15
	flagPushButton  = 1 << 16
	flagCombo       = 1 << 17
	flagEdit        = 1 << 18
	flagMultiSelect = 1 << 21
)

// inherited are the field attributes a field takes from its ancestors.
type inherited struct {
	ft, da string
	ff     int
	v      types.Object
	maxLen int
	opt    types.Object
}

// FormFields returns the fillable fields of the PDF in, in the order of
// the form's field tree; a PDF without a form has none. Push buttons and
// signature fields, which hold no value to fill, are left out. Errors:
// those of open; a field tree nested past MaxDepth or containing itself.
func FormFields(ctx context.Context, in []byte) ([]Field, error) {
	d, err := open(ctx, in)
	if err != nil {
		return nil, err
	}
	return d.fields(ctx)
}

// fields walks the AcroForm's field tree.
func (d *doc) fields(ctx context.Context) ([]Field, error) {
	root, err := d.xrt.Catalog()
	if err != nil {
		return nil, documents.Errorf("the PDF has no readable catalog (%v); the file is damaged", err)
	}
	acro, err := d.dict(root["AcroForm"])
	if err != nil || acro == nil {
		return nil, err
	}
	top, err := d.array(acro["Fields"])
	if err != nil {
		return nil, err
	}
	inh := inherited{}
	if da, ok := d.text(acro["DA"]); ok {
		inh.da = da
	}
	var out []Field
	onPath := map[int]bool{}
	for _, o := range top {
		if err := d.walkField(ctx, o, "", inh, 0, onPath, &out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *doc) walkField(ctx context.Context, o types.Object, parent string, inh inherited, depth int, onPath map[int]bool, out *[]Field) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if depth > MaxDepth {
		return documents.Errorf("the PDF's form field tree is nested deeper than the pdf tools' limit of %d levels; the file is damaged or built to exhaust a parser", MaxDepth)
	}
	if ir, ok := o.(types.IndirectRef); ok {
		n := ir.ObjectNumber.Value()
		if onPath[n] {
			return documents.Errorf("the PDF's form field tree contains itself (object %d is its own ancestor); the file is damaged or built to trap a parser", n)
		}
		onPath[n] = true
		defer delete(onPath, n)
	}
	fd, err := d.dict(o)
	if err != nil || fd == nil {
		return err
	}
	if ft := d.name(fd["FT"]); ft != "" {
		inh.ft = ft
	}
	if ff, ok := d.number(fd["Ff"]); ok {
		inh.ff = int(ff)
	}
	if v, ok := fd.Find("V"); ok {
		inh.v = v
	}
	if da, ok := d.text(fd["DA"]); ok {
		inh.da = da
	}
	if ml, ok := d.number(fd["MaxLen"]); ok {
		inh.maxLen = int(ml)
	}
	if opt, ok := fd.Find("Opt"); ok {
		inh.opt = opt
	}
	name := parent
	if t, ok := d.text(fd["T"]); ok && t != "" {
		if name != "" {
			name += "."
		}
		name += t
	}
	kids, err := d.array(fd["Kids"])
	if err != nil {
		return err
	}
	var widgets []widget
	var children []types.Object
	for _, k := range kids {
		kd, err := d.dict(k)
		if err != nil {
			return err
		}
		if kd == nil {
			continue
		}
		if _, hasT := kd.Find("T"); hasT {
			children = append(children, k)
		} else {
			widgets = append(widgets, d.widgetOf(kd))
		}
	}
	for _, c := range children {
		if err := d.walkField(ctx, c, name, inh, depth+1, onPath, out); err != nil {
			return err
		}
	}
	if len(children) > 0 && len(widgets) == 0 {
		return nil // a node of the tree, not a field
	}
	if len(kids) == 0 {
		widgets = append(widgets, d.widgetOf(fd)) // a field and its widget in one
	}
	f := Field{Name: name, dict: fd, widgets: widgets, flags: inh.ff, maxLen: inh.maxLen, da: inh.da, ReadOnly: inh.ff&flagReadOnly != 0}
	switch inh.ft {
	case "Tx":
		f.Type = "text"
		f.Value, _ = d.text(inh.v)
	case "Btn":
		if inh.ff&flagPushButton != 0 {
			return nil
		}
		f.Type = "checkbox"
		if inh.ff&flagRadio != 0 {
			f.Type = "radio"
		}
		for _, w := range widgets {
			if w.on != "" && !slices.Contains(f.Options, w.on) {
				f.Options = append(f.Options, w.on)
			}
		}
		f.Value = d.name(inh.v)
		if f.Value == "" && len(widgets) > 0 {
			f.Value = d.name(widgets[0].dict["AS"])
		}
		if f.Value == "" {
			f.Value = "Off"
		}
	case "Ch":
		f.Type = "choice"
		opts, err := d.array(inh.opt)
		if err != nil {
			return err
		}
		for _, op := range opts {
			if pair, _ := d.array(op); len(pair) == 2 {
				exp, _ := d.text(pair[0])
				disp, _ := d.text(pair[1])
				f.Options = append(f.Options, exp)
				f.displays = append(f.displays, disp)
				continue
			}
			s, _ := d.text(op)
			f.Options = append(f.Options, s)
			f.displays = append(f.displays, s)
		}
		if s, ok := d.text(inh.v); ok {
			f.Value = s
		} else if a, _ := d.array(inh.v); a != nil {
			var vs []string
			for _, e := range a {
				if s, ok := d.text(e); ok {
					vs = append(vs, s)
				}
			}
			f.Value = strings.Join(vs, ", ")
		}
	default: // a signature, or a field of no type
		return nil
	}
	if name == "" {
		return nil // a field with no name cannot be filled by name
	}
	*out = append(*out, f)
	return nil
}

// widgetOf reads a widget annotation: the state its normal appearance
// turns on, when it has one.
func (d *doc) widgetOf(wd types.Dict) widget {
	w := widget{dict: wd}
	ap, _ := d.dict(wd["AP"])
	if ap == nil {
		return w
	}
	n, _ := d.dict(ap["N"])
	var states []string
	for k := range n {
		if k != "Off" {
			states = append(states, k)
		}
	}
	slices.Sort(states)
	if len(states) > 0 {
		w.on = states[0]
	}
	return w
}

// FillForm returns the PDF in with the named fields set to values, and
// the appearance of each drawn anew: text fields and choices in
// Helvetica (whose code page, Windows-1252, limits what the drawing
// shows: a character outside it is drawn as "?", while the value itself
// keeps it), check boxes and radio buttons by the states their widgets
// already draw. A text field takes any text (within its maximum
// length); a check box "true", "false", or the name of its on state; a
// radio group one of its states' names, or "Off"; a choice one of its
// options (by export value or shown text), or any text when it is
// editable. Errors, each a refusal naming the field: a name the form
// does not have (listing those it has), a read-only field, a value the
// field cannot take; those of open; pdfcpu's failure to write the file.
func FillForm(ctx context.Context, in []byte, values map[string]string) ([]byte, error) {
	if len(values) == 0 {
		return nil, documents.Errorf("no fields to fill were given; give fields as {\"name\": \"value\"}")
	}
	d, err := open(ctx, in)
	if err != nil {
		return nil, err
	}
	fields, err := d.fields(ctx)
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, documents.Errorf("the PDF has no form fields to fill")
	}
	// Two fields of one name (which the format forbids, and some files
	// have) are both filled.
	byName := map[string][]*Field{}
	for i := range fields {
		byName[fields[i].Name] = append(byName[fields[i].Name], &fields[i])
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if byName[n] == nil {
			return nil, documents.Errorf("the form has no field %q; its fields are %s", n, fieldList(fields))
		}
	}
	fill := &filler{d: d}
	for _, n := range names {
		for _, f := range byName[n] {
			if err := fill.set(f, values[n]); err != nil {
				return nil, err
			}
		}
	}
	return d.write()
}

// fieldList names fields for a message, at most 60 of them.
func fieldList(fields []Field) string {
	var parts []string
	for i, f := range fields {
		if i == 60 {
			parts = append(parts, fmt.Sprintf("and %d more", len(fields)-60))
			break
		}
		parts = append(parts, fmt.Sprintf("%q (%s)", f.Name, f.Type))
	}
	return strings.Join(parts, ", ")
}

// filler sets fields' values and draws their appearances.
type filler struct {
	d    *doc
	helv *types.IndirectRef // the Helvetica font the appearances use
}

// set gives field f the value v.
func (fl *filler) set(f *Field, v string) error {
	if f.ReadOnly {
		return documents.Errorf("the field %q is read-only; the form does not let it be filled", f.Name)
	}
	switch f.Type {
	case "text":
		if f.maxLen > 0 && len([]rune(v)) > f.maxLen {
			return documents.Errorf("the field %q takes at most %d characters; %q has %d", f.Name, f.maxLen, v, len([]rune(v)))
		}
		f.dict.Update("V", textString(v))
		for _, w := range f.widgets {
			if err := fl.drawText(f, w, v); err != nil {
				return err
			}
		}
	case "checkbox":
		on := ""
		if len(f.Options) > 0 {
			on = f.Options[0]
		}
		state := ""
		switch {
		case strings.EqualFold(v, "true"):
			state = on
		case strings.EqualFold(v, "false") || strings.EqualFold(v, "Off"):
			state = "Off"
		default:
			for _, o := range f.Options {
				if strings.EqualFold(v, o) {
					state = o
				}
			}
		}
		if state == "" {
			return documents.Errorf("the check box %q takes \"true\", \"false\" or its on state's name %s, not %q", f.Name, quoted(f.Options), v)
		}
		fl.setButton(f, state)
	case "radio":
		state := ""
		if strings.EqualFold(v, "Off") {
			state = "Off"
		}
		for _, o := range f.Options {
			if strings.EqualFold(v, o) {
				state = o
			}
		}
		if state == "" {
			return documents.Errorf("the radio group %q takes one of %s (or \"Off\"), not %q", f.Name, quoted(f.Options), v)
		}
		fl.setButton(f, state)
	case "choice":
		val := ""
		found := false
		for i, o := range f.Options {
			if v == o || (i < len(f.displays) && v == f.displays[i]) {
				val, found = o, true
				break
			}
		}
		if !found {
			for i, o := range f.Options {
				if strings.EqualFold(v, o) || (i < len(f.displays) && strings.EqualFold(v, f.displays[i])) {
					val, found = o, true
					break
				}
			}
		}
		if !found && f.flags&flagCombo != 0 && f.flags&flagEdit != 0 {
			val, found = v, true
		}
		if !found {
			return documents.Errorf("the choice %q takes one of %s, not %q", f.Name, quoted(f.Options), v)
		}
		f.dict.Update("V", textString(val))
		f.dict.Delete("I")
		shown := val
		for i, o := range f.Options {
			if o == val && i < len(f.displays) && f.displays[i] != "" {
				shown = f.displays[i]
			}
		}
		for _, w := range f.widgets {
			var err error
			if f.flags&flagCombo != 0 {
				err = fl.drawText(f, w, shown)
			} else {
				err = fl.drawList(f, w, val)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// setButton turns a check box or radio group to state: each widget
// shows it when it has that state, and Off otherwise.
func (fl *filler) setButton(f *Field, state string) {
	f.dict.Update("V", types.Name(state))
	for _, w := range f.widgets {
		as := "Off"
		if w.on == state {
			as = state
		}
		w.dict.Update("AS", types.Name(as))
	}
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	if len(q) == 0 {
		return "(none)"
	}
	return strings.Join(q, ", ")
}

// textString is s as a PDF text string: PDFDocEncoding's ASCII when it
// is, UTF-16 with its byte order mark otherwise.
func textString(s string) types.StringLiteral {
	ascii := true
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			ascii = false
			break
		}
	}
	if !ascii {
		s = types.EncodeUTF16String(s)
	}
	esc, err := types.Escape(s)
	if err != nil || esc == nil {
		return types.StringLiteral("")
	}
	return types.StringLiteral(*esc)
}

// drawText gives widget w a new normal appearance showing text, in
// Helvetica, at the size its default appearance asks (shrunk to fit the
// box's height), or one that fits.
func (fl *filler) drawText(f *Field, w widget, text string) error {
	wd, ht, ok := fl.box(w)
	if !ok {
		return nil
	}
	multiline := f.Type == "text" && f.flags&flagMultiline != 0
	size := daSize(f.da)
	if size <= 0 {
		size = 12
		if multiline {
			size = 10
		}
	}
	if !multiline {
		size = min(size, max((ht-2)/1.15, 2))
	}
	var lines []string
	if multiline {
		lines = wrapHelvetica(text, wd-4, size)
	} else {
		lines = []string{strings.ReplaceAll(text, "\n", " ")}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "/Tx BMC\nq\n1 1 %.2f %.2f re W n\nBT\n/Helv %.2f Tf 0 g\n", wd-2, ht-2, size)
	y := (ht - size*0.72) / 2
	if multiline {
		y = ht - 2 - size
	}
	fmt.Fprintf(&b, "2 %.2f Td\n%.2f TL\n", y, size*1.15)
	for i, ln := range lines {
		if i > 0 {
			b.WriteString("T*\n")
		}
		fmt.Fprintf(&b, "(%s) Tj\n", escapeLiteral(toWinAnsi(ln)))
	}
	b.WriteString("ET\nQ\nEMC\n")
	return fl.setAppearance(w, wd, ht, b.String())
}

// drawList gives a list box's widget w a new normal appearance: its
// options, one a line, the chosen one highlighted.
func (fl *filler) drawList(f *Field, w widget, chosen string) error {
	wd, ht, ok := fl.box(w)
	if !ok {
		return nil
	}
	size := daSize(f.da)
	if size <= 0 {
		size = 10
	}
	lh := size * 1.15
	var b strings.Builder
	fmt.Fprintf(&b, "/Tx BMC\nq\n1 1 %.2f %.2f re W n\n", wd-2, ht-2)
	for i, o := range f.Options {
		if o == chosen {
			fmt.Fprintf(&b, "0.6 0.75 0.9 rg 1 %.2f %.2f %.2f re f\n", ht-1-float64(i+1)*lh, wd-2, lh)
		}
	}
	fmt.Fprintf(&b, "BT\n/Helv %.2f Tf 0 g\n2 %.2f Td\n%.2f TL\n", size, ht-1-lh+(lh-size*0.72)/2, lh)
	for i, o := range f.Options {
		shown := o
		if i < len(f.displays) && f.displays[i] != "" {
			shown = f.displays[i]
		}
		if i > 0 {
			b.WriteString("T*\n")
		}
		fmt.Fprintf(&b, "(%s) Tj\n", escapeLiteral(toWinAnsi(shown)))
	}
	b.WriteString("ET\nQ\nEMC\n")
	return fl.setAppearance(w, wd, ht, b.String())
}

// box is the width and height of widget w's rectangle, or reports it
// has none worth drawing.
func (fl *filler) box(w widget) (float64, float64, bool) {
	rect, _ := fl.d.array(w.dict["Rect"])
	if len(rect) != 4 {
		return 0, 0, false
	}
	var r [4]float64
	for i := range r {
		r[i], _ = fl.d.number(rect[i])
	}
	wd, ht := math.Abs(r[2]-r[0]), math.Abs(r[3]-r[1])
	return wd, ht, wd >= 1 && ht >= 1
}

// setAppearance makes content, drawn in a wd×ht box with Helvetica as
// /Helv, widget w's normal appearance.
func (fl *filler) setAppearance(w widget, wd, ht float64, content string) error {
	if fl.helv == nil {
		fd := types.Dict{
			"Type":     types.Name("Font"),
			"Subtype":  types.Name("Type1"),
			"BaseFont": types.Name("Helvetica"),
			"Encoding": types.Name("WinAnsiEncoding"),
		}
		ref, err := fl.d.xrt.IndRefForNewObject(fd)
		if err != nil {
			return documents.Errorf("the filled form cannot be written: %v", err)
		}
		fl.helv = ref
	}
	sd, err := fl.d.xrt.NewStreamDictForBuf([]byte(content))
	if err != nil {
		return documents.Errorf("the filled form cannot be written: %v", err)
	}
	sd.InsertName("Type", "XObject")
	sd.InsertName("Subtype", "Form")
	sd.Insert("BBox", types.NewNumberArray(0, 0, wd, ht))
	sd.Insert("Resources", types.Dict{"Font": types.Dict{"Helv": *fl.helv}})
	if err := sd.Encode(); err != nil {
		return documents.Errorf("the filled form cannot be written: %v", err)
	}
	ref, err := fl.d.xrt.IndRefForNewObject(*sd)
	if err != nil {
		return documents.Errorf("the filled form cannot be written: %v", err)
	}
	w.dict.Update("AP", types.Dict{"N": *ref})
	return nil
}

// daSize is the text size a default appearance string sets ("/Helv 0 Tf
// 0 g" sets 0, which means fit to the box), or 0.
func daSize(da string) float64 {
	fs := strings.Fields(da)
	for i, t := range fs {
		if t == "Tf" && i >= 1 {
			if v, err := strconv.ParseFloat(fs[i-1], 64); err == nil {
				return v
			}
		}
	}
	return 0
}

// toWinAnsi is s in WinAnsiEncoding, "?" for what it cannot hold.
func toWinAnsi(s string) []byte {
	var out []byte
	for _, r := range s {
		if b, ok := charmap.Windows1252.EncodeRune(r); ok {
			out = append(out, b)
		} else {
			out = append(out, '?')
		}
	}
	return out
}

// escapeLiteral writes b as the inside of a PDF literal string.
func escapeLiteral(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		switch c {
		case '(', ')', '\\':
			s.WriteByte('\\')
			s.WriteByte(c)
		case '\n':
			s.WriteString(`\n`)
		case '\r':
			s.WriteString(`\r`)
		default:
			s.WriteByte(c)
		}
	}
	return s.String()
}

// wrapHelvetica breaks text into lines no wider than width at size.
func wrapHelvetica(text string, width, size float64) []string {
	measure := func(s string) float64 {
		w := 0.0
		for _, c := range toWinAnsi(s) {
			cw, err := pdffont.CharWidth("Helvetica", rune(c))
			if err != nil || cw == 0 {
				cw = 556
			}
			w += float64(cw)
		}
		return w / 1000 * size
	}
	var lines []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			next := word
			if line != "" {
				next = line + " " + word
			}
			if line != "" && measure(next) > width {
				lines = append(lines, line)
				line = word
				continue
			}
			line = next
		}
		lines = append(lines, line)
	}
	return lines
}
