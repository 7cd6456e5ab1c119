// Package convert is the worker tool of the custom-tool example:
// convert_units, which converts a quantity between units of length, mass
// or time. It needs no workspace, so a worker can hold it: a tool that
// calls an internal service would be built the same way.
package convert

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/tools"
)

// Tool is convert_units.
type Tool struct{}

// units are the units known, each as its kind and its size in the kind's
// base unit (metres, kilograms, seconds).
var units = map[string]struct {
	kind string
	size float64
}{
	"mm": {"length", 0.001}, "cm": {"length", 0.01}, "m": {"length", 1}, "km": {"length", 1000},
	"in": {"length", 0.0254}, "ft": {"length", 0.3048}, "mi": {"length", 1609.344},
	"g": {"mass", 0.001}, "kg": {"mass", 1}, "lb": {"mass", 0.45359237}, "oz": {"mass", 0.028349523125},
	"s": {"time", 1}, "min": {"time", 60}, "h": {"time", 3600}, "d": {"time", 86400},
}

// Spec describes the tool to the model.
func (Tool) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name:        "convert_units",
		Description: "Convert a quantity from one unit to another: mm cm m km in ft mi, g kg lb oz, s min h d.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["value","from","to"],"properties":{` +
			`"value":{"type":"number"},"from":{"type":"string","description":"the unit of value"},"to":{"type":"string","description":"the unit wanted"}}}`),
	}
}

// ReadOnly marks the tool as changing nothing: a call cut off by a crash
// is simply made again.
func (Tool) ReadOnly() {}

// Invoke converts the quantity. It declares no gate, so a call is judged
// as an exec of "convert_units".
func (Tool) Invoke(_ context.Context, _ *tools.Env, args json.RawMessage) (*tools.Output, error) {
	var a struct {
		Value    *float64 `json:"value"`
		From, To string
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Value == nil {
		return nil, protocol.Errorf(protocol.CodeBadArguments, `give the quantity as {"value": 3, "from": "km", "to": "mi"}`)
	}
	from, ok1 := units[a.From]
	to, ok2 := units[a.To]
	switch {
	case !ok1 || !ok2:
		return nil, protocol.Errorf(protocol.CodeBadArguments, "unknown unit %q or %q; the units are mm cm m km in ft mi, g kg lb oz, s min h d", a.From, a.To)
	case from.kind != to.kind:
		return nil, protocol.Errorf(protocol.CodeBadArguments, "%s is a unit of %s and %s of %s; convert between units of one kind", a.From, from.kind, a.To, to.kind)
	}
	v := *a.Value * from.size / to.size
	return &tools.Output{Content: fmt.Sprintf("%s %s = %s %s", strconv.FormatFloat(*a.Value, 'g', -1, 64), a.From, strconv.FormatFloat(v, 'g', 6, 64), a.To)}, nil
}
