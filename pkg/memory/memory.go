// Package memory keeps what agents ask to remember about a workspace, for
// the runs that come to it later: short notes under keys, one set per
// workspace, in a JetStream key-value bucket (harness-memory, made by
// pkg/wire). The notes are bounded (MaxNotes notes, MaxChars characters in
// all, MaxNoteChars each); a write past the bounds forgets the oldest notes
// first, never the one it wrote.
//
// A caller's steps:
//
//	s := memory.New(assets.Memory)        // or .Tenant(name) for a tenant's runs
//	evicted, err := s.Put(ctx, ws, note)  // the remember tool
//	notes, err := s.List(ctx, ws)         // a new run's started record
//	err = s.Delete(ctx, ws, key)          // an operator's harness memory rm
//
// Notes are agent-authored: they can be wrong, stale or planted, and whoever
// shows them to a model says so.
package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/pkg/protocol"
)

// The bounds of one workspace's memory, as io-harness has them
// (MEMORY_MAX_ENTRIES, MEMORY_MAX_CHARS, MEMORY_MAX_ENTRY_CHARS).
// Characters are Unicode code points, not bytes.
const (
	// MaxNotes is the most notes a workspace keeps.
	MaxNotes = 64
	// MaxChars is the most characters a workspace's notes' values hold in
	// all.
	MaxChars = 16000
	// MaxNoteChars is the most characters one note's value holds, its
	// Truncated marker included: a longer value is cut.
	MaxNoteChars = 2000
	// MaxKeyChars is the longest key a note may have.
	MaxKeyChars = 200
)

// Truncated ends a value that was cut to MaxNoteChars.
const Truncated = "…[truncated]"

// maxTries bounds the compare-and-set attempts of one write.
const maxTries = 100

// Store reads and writes the notes of workspaces. It is safe for
// concurrent use, by any number of processes: every write is a
// compare-and-set of the workspace's entry, tried again when another
// write came first, so concurrent writes lose nothing.
type Store struct {
	kv     jetstream.KeyValue
	tenant string
	now    func() time.Time
}

// New returns a store over the bucket (wire.Assets.Memory).
func New(kv jetstream.KeyValue) *Store {
	return &Store{kv: kv, now: time.Now}
}

// Tenant returns the store of one tenant's workspaces: a tenant's root or
// snapshot is a workspace apart from the same root or snapshot of anyone
// else, so no tenant reads or plants another's notes. Tenant("") is the
// store of the runs submitted on harness.submit itself.
func (s *Store) Tenant(name string) *Store {
	return &Store{kv: s.kv, tenant: name, now: s.now}
}

// Identity names the workspace whose notes ws shares: "root:" and the
// cleaned root for a directory, as the contract names it, "snapshot:"
// and the ref for a snapshot, or "file:" and the cleaned path for a
// single-file workspace. It is "" for a workspace that names none.
//
// A root is a path on a sandboxer, not a machine's directory: the same
// path served by two sandboxers is taken as the same workspace, and two
// spellings of one directory (a symbolic link, a relative root resolved
// against a sandboxer's base) as two.
func Identity(ws protocol.Workspace) string {
	switch {
	case ws.Snapshot != "":
		return "snapshot:" + ws.Snapshot
	case strings.TrimSpace(ws.Root) != "":
		return "root:" + filepath.Clean(ws.Root)
	case ws.File != "":
		return "file:" + filepath.Clean(ws.File)
	}
	return ""
}

// identity is ws's identity in this store: a tenant's carries its name.
func (s *Store) identity(ws protocol.Workspace) (string, error) {
	id := Identity(ws)
	if id == "" {
		return "", protocol.FieldError(protocol.CodeInvalidField, "workspace", "name a root, a snapshot or a file",
			"the workspace names no root, snapshot or file, so it has no memory")
	}
	if s.tenant != "" {
		id = "tenant:" + s.tenant + "/" + id
	}
	return id, nil
}

// key is the bucket key of an identity: the hex SHA-256 of it, since an
// identity holds characters a key may not.
func key(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:])
}

// entry is the bucket value of one workspace: its identity and its
// notes, oldest first.
type entry struct {
	Workspace string          `json:"workspace"`
	Notes     []protocol.Note `json:"notes"`
}

// read returns the entry of identity and its revision; revision 0 when
// the workspace has no entry.
func (s *Store) read(ctx context.Context, identity string) (*entry, uint64, error) {
	e, err := s.kv.Get(ctx, key(identity))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &entry{Workspace: identity}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the notes of %s: %w", identity, err)
	}
	var en entry
	if err := json.Unmarshal(e.Value(), &en); err != nil {
		return nil, 0, fmt.Errorf("decode the notes of %s: %w", identity, err)
	}
	if en.Workspace != identity {
		// Two identities under one hash: never expected, and never to be
		// mixed up.
		return nil, 0, fmt.Errorf("the notes under the key of %s belong to %s", identity, en.Workspace)
	}
	return &en, e.Revision(), nil
}

// update applies change to the entry of identity and writes it back by
// compare-and-set, reading it again and applying change afresh when
// another write came first. An entry change leaves empty is deleted.
// change's own error ends the update with nothing written.
func (s *Store) update(ctx context.Context, identity string, change func(*entry) error) error {
	k := key(identity)
	wait := time.Millisecond
	for range maxTries {
		en, rev, err := s.read(ctx, identity)
		if err != nil {
			return err
		}
		if err := change(en); err != nil {
			return err
		}
		switch {
		case len(en.Notes) == 0 && rev == 0:
			return nil
		case len(en.Notes) == 0:
			err = s.kv.Delete(ctx, k, jetstream.LastRevision(rev))
		default:
			data, merr := json.Marshal(en)
			if merr != nil {
				return merr
			}
			if rev == 0 {
				_, err = s.kv.Create(ctx, k, data)
			} else {
				_, err = s.kv.Update(ctx, k, data, rev)
			}
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("write the notes of %s: %w", identity, err)
		}
		// Another write came first. A jittered wait keeps writers that
		// collided from colliding again in step.
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
	return protocol.Errorf(protocol.CodeUnavailable, "the notes of %s were written by others %d times while this write was tried; try again", identity, maxTries)
}

// Cut returns value cut to MaxNoteChars characters, its end replaced by
// Truncated, and whether it was cut.
func Cut(value string) (string, bool) {
	if utf8.RuneCountInString(value) <= MaxNoteChars {
		return value, false
	}
	keep := MaxNoteChars - utf8.RuneCountInString(Truncated)
	i := 0
	for n := 0; n < keep; n++ {
		_, size := utf8.DecodeRuneInString(value[i:])
		i += size
	}
	return value[:i] + Truncated, true
}

// checkKey refuses a key no note may have.
func checkKey(k string) error {
	switch {
	case strings.TrimSpace(k) == "":
		return protocol.FieldError(protocol.CodeBadArguments, "key", "name the note with a short key, such as \"build\" or \"layout\"",
			"the key is empty")
	case utf8.RuneCountInString(k) > MaxKeyChars:
		return protocol.FieldError(protocol.CodeBadArguments, "key", fmt.Sprintf("use a key of at most %d characters and put the detail in the value", MaxKeyChars),
			"the key is %d characters long", utf8.RuneCountInString(k))
	case strings.IndexFunc(k, unicode.IsControl) >= 0 || !utf8.ValidString(k):
		return protocol.FieldError(protocol.CodeBadArguments, "key", "use a key of one line of printable characters",
			"the key holds a control character or invalid UTF-8")
	}
	return nil
}

// Put writes note under note.Key in ws's memory, stamped with the time
// now; note.Run and note.Step say who wrote it. A note already under the
// key is replaced, and the new one counts as the newest. A value longer
// than MaxNoteChars is cut (see Cut). Then the oldest notes are forgotten,
// never the one just written, until at most MaxNotes notes of at most
// MaxChars characters in all are left; Put returns their keys, oldest
// first.
//
// Errors: CodeBadArguments for an empty key or value, a key longer than
// MaxKeyChars or holding a control character; CodeInvalidField for a
// workspace that names no root, snapshot or file; CodeUnavailable when
// other writes kept coming first; the bucket's errors, wrapped.
func (s *Store) Put(ctx context.Context, ws protocol.Workspace, note protocol.Note) (evicted []string, err error) {
	if err := checkKey(note.Key); err != nil {
		return nil, err
	}
	if strings.TrimSpace(note.Value) == "" {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "value", "say what to remember in the value",
			"the value of %q is empty", note.Key)
	}
	id, err := s.identity(ws)
	if err != nil {
		return nil, err
	}
	err = s.update(ctx, id, func(en *entry) error {
		note.Time = s.now().UTC()
		en.Notes, evicted = Upsert(en.Notes, note)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evicted, nil
}

// Upsert is Put's arithmetic, without I/O: notes (oldest first) with note
// written in, its value cut (see Cut), and the keys of the notes
// forgotten to keep the bounds, oldest first. The newest note, the one
// just written, is never among them: alone it is within every bound.
// notes is not changed.
func Upsert(notes []protocol.Note, note protocol.Note) ([]protocol.Note, []string) {
	note.Value, _ = Cut(note.Value)
	out := make([]protocol.Note, 0, len(notes)+1)
	for _, n := range notes {
		if n.Key != note.Key {
			out = append(out, n)
		}
	}
	out = append(out, note)
	chars := 0
	for _, n := range out {
		chars += utf8.RuneCountInString(n.Value)
	}
	var gone []string
	for len(out) > 1 && (len(out) > MaxNotes || chars > MaxChars) {
		chars -= utf8.RuneCountInString(out[0].Value)
		gone = append(gone, out[0].Key)
		out = out[1:]
	}
	return out, gone
}

// List returns ws's notes, oldest first; none when it has none.
//
// Errors: CodeInvalidField for a workspace that names no root, snapshot or
// file; the bucket's errors, wrapped.
func (s *Store) List(ctx context.Context, ws protocol.Workspace) ([]protocol.Note, error) {
	id, err := s.identity(ws)
	if err != nil {
		return nil, err
	}
	en, _, err := s.read(ctx, id)
	if err != nil {
		return nil, err
	}
	return en.Notes, nil
}

// Delete forgets the note under key in ws's memory.
//
// Errors: CodeNotFound when ws keeps no note under key (its hint names the
// nearest key it does keep) or no notes at all; CodeInvalidField for a
// workspace that names no root, snapshot or file; CodeUnavailable when
// other writes kept coming first; the bucket's errors, wrapped.
func (s *Store) Delete(ctx context.Context, ws protocol.Workspace, key string) error {
	id, err := s.identity(ws)
	if err != nil {
		return err
	}
	return s.update(ctx, id, func(en *entry) error {
		if len(en.Notes) == 0 {
			return protocol.FieldError(protocol.CodeNotFound, "workspace", "list the workspaces that have notes (harness memory ls)",
				"no notes are kept for %s", id)
		}
		i := slices.IndexFunc(en.Notes, func(n protocol.Note) bool { return n.Key == key })
		if i < 0 {
			return protocol.FieldError(protocol.CodeNotFound, "key", keyHint(en.Notes, key), "no note %q in %s", key, id)
		}
		en.Notes = slices.Delete(en.Notes, i, i+1)
		return nil
	})
}

// keyHint says which keys there are, the nearest to a mistyped one first.
func keyHint(notes []protocol.Note, typed string) string {
	best, bestD := "", 0
	var list strings.Builder
	full := false
	for i, n := range notes {
		if d := distance(strings.ToLower(typed), strings.ToLower(n.Key)); best == "" || d < bestD {
			best, bestD = n.Key, d
		}
		if full {
			continue
		}
		if i > 0 {
			list.WriteString(", ")
		}
		if list.Len()+len(n.Key) > 400 {
			list.WriteString("…")
			full = true
			continue
		}
		fmt.Fprintf(&list, "%q", n.Key)
	}
	if bestD <= max(2, utf8.RuneCountInString(typed)/3) {
		return fmt.Sprintf("did you mean %q? The keys are %s", best, list.String())
	}
	return "the keys are " + list.String()
}

// distance is the Levenshtein distance of two strings, by characters.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Clear forgets every note of ws and returns how many there were; 0, and
// no error, when it had none.
//
// Errors: CodeInvalidField for a workspace that names no root, snapshot or
// file; the bucket's errors, wrapped.
func (s *Store) Clear(ctx context.Context, ws protocol.Workspace) (int, error) {
	id, err := s.identity(ws)
	if err != nil {
		return 0, err
	}
	en, _, err := s.read(ctx, id)
	if err != nil || len(en.Notes) == 0 {
		return 0, err
	}
	// A purge, not a compare-and-set: whatever was written meanwhile
	// goes too, as a clear asks.
	if err := s.kv.Purge(ctx, key(id)); err != nil {
		return 0, fmt.Errorf("clear the notes of %s: %w", id, err)
	}
	return len(en.Notes), nil
}

// Summary is one workspace that keeps notes: its identity (a tenant's
// prefixed "tenant:<name>/"), how many notes and how many characters.
type Summary struct {
	Workspace string `json:"workspace"`
	Notes     int    `json:"notes"`
	Chars     int    `json:"chars"`
}

// Workspaces returns every workspace that keeps notes, by identity; on a
// Tenant's store, only that tenant's.
//
// Errors: the bucket's, wrapped.
func (s *Store) Workspaces(ctx context.Context) ([]Summary, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the workspaces with notes: %w", err)
	}
	var names []string
	for k := range keys.Keys() {
		if !slices.Contains(names, k) { // a listing may name a key twice
			names = append(names, k)
		}
	}
	_ = keys.Stop() // the listing ended its watch itself once done
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list the workspaces with notes: %w", err) // the listing was cut short
	}
	var out []Summary
	for _, k := range names {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // cleared since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("read the notes under %s: %w", k, err)
		}
		var en entry
		if err := json.Unmarshal(e.Value(), &en); err != nil {
			return nil, fmt.Errorf("decode the notes under %s: %w", k, err)
		}
		if len(en.Notes) == 0 || (s.tenant != "" && !strings.HasPrefix(en.Workspace, "tenant:"+s.tenant+"/")) {
			continue
		}
		sum := Summary{Workspace: en.Workspace, Notes: len(en.Notes)}
		for _, n := range en.Notes {
			sum.Chars += utf8.RuneCountInString(n.Value)
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(a, b Summary) int { return strings.Compare(a.Workspace, b.Workspace) })
	return out, nil
}
