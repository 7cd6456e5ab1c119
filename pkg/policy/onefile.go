package policy

import (
	"slices"

	"github.com/ioharness/harness/internal/glob"
)

// FileLayer is the name of the layer [Policy.OneFile] adds: the one file a
// single-file contract gives its agent.
const FileLayer = "builtin-file"

// subdirs is the pattern of every path below the workspace root: '*'
// crosses '/', and a pattern with a '/' never matches a path by its last
// element alone.
const subdirs = "*/*"

// OneFile returns p confined to the one file name at the workspace root,
// as a single-file contract runs: the agent may read and write that file
// and nothing else, whatever p allows.
//
//   - Every read and write allow of p is dropped, and a read or write ask
//     stays only for name (an ask whose pattern matches name becomes an ask
//     of name alone); denies, and every exec and net rule, stay as they are.
//   - A layer FileLayer is stacked on top: it denies reading and writing
//     every path below the root ("*/*", since a path pattern is also
//     matched by its last element, so an allow of name would otherwise let
//     "sub/name" through), and allows reading and writing name.
//   - The read, write and exec defaults become Deny, and net keeps p's
//     (Deny unless p says otherwise): a command runs only where a rule of
//     p allows it.
//
// A deny of p still binds name (nothing re-allows a deny), so a secret's
// name stays unreadable. OneFile is idempotent: confining a confined
// policy to the same name gives the same policy. name must be one path
// element without '*' or '?' (protocol.Workspace checks it).
func (p *Policy) OneFile(name string) *Policy {
	p = p.orDenyAll()
	file := Layer{Name: FileLayer, Rules: []Rule{
		{Act: Read, Effect: Deny, Pattern: subdirs},
		{Act: Write, Effect: Deny, Pattern: subdirs},
		{Act: Read, Effect: Allow, Pattern: name},
		{Act: Write, Effect: Allow, Pattern: name},
	}}
	layers := make([]Layer, 0, len(p.layers)+1)
	for _, l := range p.layers {
		if sameLayer(l, file) {
			continue
		}
		kept := Layer{Name: l.Name}
		for _, r := range l.Rules {
			if r.Act == Read || r.Act == Write {
				switch r.Effect {
				case Allow:
					continue
				case Ask:
					if !glob.MatchPath(r.Pattern, name) {
						continue
					}
					r.Pattern = name
				}
			}
			if !slices.Contains(kept.Rules, r) {
				kept.Rules = append(kept.Rules, r)
			}
		}
		if len(kept.Rules) > 0 {
			layers = append(layers, kept)
		}
	}
	layers = append(layers, file)
	d := p.defaults
	d[Read], d[Write], d[Exec] = Deny, Deny, Deny
	return build(defaultsOf(d), layers)
}
