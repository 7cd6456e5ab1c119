package memory_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ioharness/harness/internal/testkit"
	"github.com/ioharness/harness/pkg/memory"
	"github.com/ioharness/harness/pkg/protocol"
	"github.com/ioharness/harness/pkg/wire"
)

// bucket returns the harness-memory bucket of a fresh embedded NATS
// server, made as every role makes it (wire.Ensure).
func bucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(testkit.Conn(t, testkit.NATS(t)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := wire.Ensure(t.Context(), js, wire.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return a.Memory
}

var ws = protocol.Workspace{Root: "/srv/ws"}

func keys(notes []protocol.Note) []string {
	var ks []string
	for _, n := range notes {
		ks = append(ks, n.Key)
	}
	return ks
}

func chars(notes []protocol.Note) int {
	c := 0
	for _, n := range notes {
		c += utf8.RuneCountInString(n.Value)
	}
	return c
}

func put(t *testing.T, s *memory.Store, key, value string) []string {
	t.Helper()
	evicted, err := s.Put(t.Context(), ws, protocol.Note{Key: key, Value: value, Run: "r1", Step: 1})
	if err != nil {
		t.Fatalf("Put(%q) = %v", key, err)
	}
	return evicted
}

func list(t *testing.T, s *memory.Store) []protocol.Note {
	t.Helper()
	notes, err := s.List(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	return notes
}

func TestIdentity(t *testing.T) {
	snap := "sha256-" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		ws   protocol.Workspace
		want string
	}{
		{"absolute root", protocol.Workspace{Root: "/srv/ws"}, "root:/srv/ws"},
		{"root cleaned", protocol.Workspace{Root: "/srv/./x/../ws/"}, "root:/srv/ws"},
		{"relative root as named", protocol.Workspace{Root: "ws/./a"}, "root:ws/a"},
		{"snapshot", protocol.Workspace{Snapshot: snap}, "snapshot:" + snap},
		{"neither", protocol.Workspace{Root: "  "}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memory.Identity(tc.ws); got != tc.want {
				t.Errorf("Identity(%+v) = %q, want %q", tc.ws, got, tc.want)
			}
		})
	}
}

// TestPutCutsALongValue: a value past MaxNoteChars characters (not bytes)
// is kept as its first characters and the marker, MaxNoteChars in all.
func TestPutCutsALongValue(t *testing.T) {
	s := memory.New(bucket(t))
	long := strings.Repeat("é", memory.MaxNoteChars+500)
	put(t, s, "long", long)
	exact := strings.Repeat("x", memory.MaxNoteChars)
	put(t, s, "exact", exact)
	notes := list(t, s)
	got := notes[0].Value
	if n := utf8.RuneCountInString(got); n != memory.MaxNoteChars {
		t.Errorf("the cut value has %d characters, want %d", n, memory.MaxNoteChars)
	}
	if !strings.HasSuffix(got, memory.Truncated) || !strings.HasPrefix(got, strings.Repeat("é", 100)) || !utf8.ValidString(got) {
		t.Errorf("the cut value = %q…%q, want the value's start and the %q marker", got[:20], got[len(got)-20:], memory.Truncated)
	}
	if notes[1].Value != exact {
		t.Errorf("a value of exactly %d characters was changed", memory.MaxNoteChars)
	}
}

// TestPutKeepsAtMostMaxNotes: the 65th note forgets the oldest, and only
// it.
func TestPutKeepsAtMostMaxNotes(t *testing.T) {
	s := memory.New(bucket(t))
	for i := range memory.MaxNotes {
		if ev := put(t, s, fmt.Sprintf("k%02d", i), "v"); len(ev) != 0 {
			t.Fatalf("note %d evicted %v, want nothing", i, ev)
		}
	}
	if ev := put(t, s, "k64", "v"); !cmp.Equal(ev, []string{"k00"}) {
		t.Errorf("the 65th note evicted %v, want [k00]", ev)
	}
	notes := list(t, s)
	if len(notes) != memory.MaxNotes || notes[0].Key != "k01" || notes[len(notes)-1].Key != "k64" {
		t.Errorf("after 65 notes: %d notes, %s … %s; want 64, k01 … k64", len(notes), notes[0].Key, notes[len(notes)-1].Key)
	}
}

// TestPutKeepsAtMostMaxChars: notes filling MaxChars stay; one more
// character forgets the oldest; a full-size note forgets as many of the
// oldest as it takes, never itself.
func TestPutKeepsAtMostMaxChars(t *testing.T) {
	s := memory.New(bucket(t))
	full := strings.Repeat("x", memory.MaxNoteChars)
	for i := range memory.MaxChars / memory.MaxNoteChars {
		if ev := put(t, s, fmt.Sprintf("big%d", i), full); len(ev) != 0 {
			t.Fatalf("big%d evicted %v with %d characters kept, want nothing", i, ev, chars(list(t, s)))
		}
	}
	if got := chars(list(t, s)); got != memory.MaxChars {
		t.Fatalf("%d characters kept, want %d", got, memory.MaxChars)
	}
	if ev := put(t, s, "small", "y"); !cmp.Equal(ev, []string{"big0"}) {
		t.Errorf("one character past the bound evicted %v, want [big0]", ev)
	}
	// 7 full notes and "small": a full note takes exactly the room it
	// needs, oldest first.
	ev := put(t, s, "huge", full)
	if !cmp.Equal(ev, []string{"big1"}) {
		t.Errorf("a full note evicted %v, want [big1]", ev)
	}
	notes := list(t, s)
	if c := chars(notes); c > memory.MaxChars {
		t.Errorf("%d characters kept, want at most %d", c, memory.MaxChars)
	}
	if want := []string{"big2", "big3", "big4", "big5", "big6", "big7", "small", "huge"}; !cmp.Equal(keys(notes), want) {
		t.Errorf("kept %v, want %v", keys(notes), want)
	}
}

// TestPutNeverEvictsTheNoteJustWritten: the oldest note, written again at
// full size into a full memory, becomes the newest and stays; the next
// oldest goes in its place.
func TestPutNeverEvictsTheNoteJustWritten(t *testing.T) {
	s := memory.New(bucket(t))
	full := strings.Repeat("x", memory.MaxNoteChars)
	put(t, s, "tiny", "a")
	for i := range memory.MaxChars/memory.MaxNoteChars - 1 {
		put(t, s, fmt.Sprintf("big%d", i), full)
	}
	put(t, s, "fill", strings.Repeat("f", memory.MaxNoteChars-1)) // exactly MaxChars now
	if got := chars(list(t, s)); got != memory.MaxChars {
		t.Fatalf("%d characters kept, want %d", got, memory.MaxChars)
	}
	ev := put(t, s, "tiny", strings.Repeat("w", memory.MaxNoteChars+1)) // cut to MaxNoteChars
	if !cmp.Equal(ev, []string{"big0"}) {
		t.Errorf("rewriting the oldest note at full size evicted %v, want [big0]", ev)
	}
	notes := list(t, s)
	if last := notes[len(notes)-1]; last.Key != "tiny" || !strings.HasPrefix(last.Value, "www") {
		t.Errorf("the newest note is %q %.10q, want tiny as just written", last.Key, last.Value)
	}
}

// TestPutOverwriteRefreshes: writing a key again replaces its value,
// time and attribution, moves it to the newest, and adds no note.
func TestPutOverwriteRefreshes(t *testing.T) {
	s := memory.New(bucket(t))
	ctx := t.Context()
	if _, err := s.Put(ctx, ws, protocol.Note{Key: "build", Value: "make", Run: "r1", Step: 2}); err != nil {
		t.Fatal(err)
	}
	put(t, s, "layout", "src/ holds the code")
	before := list(t, s)[0]
	if _, err := s.Put(ctx, ws, protocol.Note{Key: "build", Value: "go build ./...", Run: "r2", Step: 5}); err != nil {
		t.Fatal(err)
	}
	notes := list(t, s)
	if !cmp.Equal(keys(notes), []string{"layout", "build"}) {
		t.Fatalf("after the overwrite: %v, want [layout build]", keys(notes))
	}
	got := notes[1]
	if got.Value != "go build ./..." || got.Run != "r2" || got.Step != 5 || got.Time.Before(before.Time) || got.Time.IsZero() {
		t.Errorf("overwritten note = %+v, want the new value, run r2, step 5 and a time not before %v", got, before.Time)
	}
}

func TestPutRefusesBadArguments(t *testing.T) {
	s := memory.New(bucket(t))
	for _, tc := range []struct {
		name, key, value string
	}{
		{"empty key", "", "v"},
		{"blank key", "  \t", "v"},
		{"empty value", "k", ""},
		{"blank value", "k", " \n "},
		{"key too long", strings.Repeat("k", memory.MaxKeyChars+1), "v"},
		{"key with a newline", "a\nb", "v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Put(t.Context(), ws, protocol.Note{Key: tc.key, Value: tc.value})
			var pe *protocol.Error
			if !errors.Is(err, protocol.ErrBadArguments) || !errors.As(err, &pe) || pe.Hint == "" {
				t.Errorf("Put(%.20q, %q) = %v, want bad_arguments with a hint", tc.key, tc.value, err)
			}
		})
	}
	if _, err := s.Put(t.Context(), ws, protocol.Note{Key: strings.Repeat("é", memory.MaxKeyChars), Value: "v"}); err != nil {
		t.Errorf("a key of %d characters was refused: %v", memory.MaxKeyChars, err)
	}
	if _, err := s.Put(t.Context(), protocol.Workspace{}, protocol.Note{Key: "k", Value: "v"}); !errors.Is(err, protocol.ErrInvalidField) {
		t.Errorf("Put on a workspace naming nothing = %v, want invalid_field", err)
	}
	if notes := list(t, s); len(notes) != 1 {
		t.Errorf("refused writes left notes: %v", keys(notes))
	}
}

// TestDeleteClearAndWorkspaces: a typo'd key is not found, with the key
// meant in the hint; deleting the last note forgets the workspace; clear
// forgets them all and says how many.
func TestDeleteClearAndWorkspaces(t *testing.T) {
	s := memory.New(bucket(t))
	ctx := t.Context()
	other := protocol.Workspace{Snapshot: "sha256-" + strings.Repeat("0", 64)}
	put(t, s, "build", "make")
	put(t, s, "layout", "src/")
	if _, err := s.Put(ctx, other, protocol.Note{Key: "x", Value: "y"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Workspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []memory.Summary{{Workspace: "root:/srv/ws", Notes: 2, Chars: 8}, {Workspace: memory.Identity(other), Notes: 1, Chars: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Workspaces (-want +got):\n%s", d)
	}

	err = s.Delete(ctx, ws, "biuld")
	var pe *protocol.Error
	if !errors.Is(err, protocol.ErrNotFound) || !errors.As(err, &pe) || !strings.Contains(pe.Hint, `did you mean "build"`) {
		t.Errorf("Delete(biuld) = %v, want not_found suggesting build", err)
	}
	if err := s.Delete(ctx, ws, "build"); err != nil {
		t.Fatal(err)
	}
	if ks := keys(list(t, s)); !cmp.Equal(ks, []string{"layout"}) {
		t.Errorf("after deleting build: %v", ks)
	}
	if err := s.Delete(ctx, other, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, other, "x"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("Delete in a workspace without notes = %v, want not_found", err)
	}
	if got, _ := s.Workspaces(ctx); len(got) != 1 || got[0].Workspace != "root:/srv/ws" {
		t.Errorf("Workspaces after the last note of one went = %+v, want only root:/srv/ws", got)
	}

	put(t, s, "more", "m")
	if n, err := s.Clear(ctx, ws); err != nil || n != 2 {
		t.Errorf("Clear = %d, %v; want 2", n, err)
	}
	if n, err := s.Clear(ctx, ws); err != nil || n != 0 {
		t.Errorf("Clear again = %d, %v; want 0", n, err)
	}
	if got, _ := s.Workspaces(ctx); len(got) != 0 {
		t.Errorf("Workspaces after the clear = %+v", got)
	}
	// A cleared workspace takes notes again.
	put(t, s, "again", "a")
	if ks := keys(list(t, s)); !cmp.Equal(ks, []string{"again"}) {
		t.Errorf("after the clear and a put: %v", ks)
	}
}

// TestTenantsKeepApart: the same root is a workspace apart for each
// tenant and for the operator's own runs.
func TestTenantsKeepApart(t *testing.T) {
	s := memory.New(bucket(t))
	ctx := t.Context()
	acme, bravo := s.Tenant("acme"), s.Tenant("bravo")
	if _, err := acme.Put(ctx, ws, protocol.Note{Key: "secret", Value: "acme's"}); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*memory.Store{"bravo": bravo, "the operator": s} {
		if notes, err := st.List(ctx, ws); err != nil || len(notes) != 0 {
			t.Errorf("%s reads %v, %v of acme's workspace", name, keys(notes), err)
		}
	}
	if got, _ := bravo.Workspaces(ctx); len(got) != 0 {
		t.Errorf("bravo lists %+v", got)
	}
	if got, _ := acme.Workspaces(ctx); len(got) != 1 || got[0].Workspace != "tenant:acme/root:/srv/ws" {
		t.Errorf("acme lists %+v, want its own workspace", got)
	}
}

// TestConcurrentPutsLoseNothing: writers on two connections, as two
// coordinators of one tree would be, write at once; every note is kept.
func TestConcurrentPutsLoseNothing(t *testing.T) {
	srv := testkit.NATS(t)
	var stores []*memory.Store
	for range 2 {
		js, err := jetstream.New(testkit.Conn(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		a, err := wire.Ensure(t.Context(), js, wire.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, memory.New(a.Memory))
	}
	const writers, each = 16, memory.MaxNotes / 16
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for i := range each {
				ev, err := s.Put(t.Context(), ws, protocol.Note{Key: fmt.Sprintf("w%02d-%d", w, i), Value: "v", Run: fmt.Sprintf("r%d", w)})
				if err == nil && len(ev) > 0 {
					err = fmt.Errorf("writer %d evicted %v", w, ev)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	notes := list(t, stores[0])
	if len(notes) != writers*each {
		t.Errorf("%d notes kept of %d written at once", len(notes), writers*each)
	}
	for w := range writers {
		for i := range each {
			k := fmt.Sprintf("w%02d-%d", w, i)
			if !strings.Contains(strings.Join(keys(notes), " "), k) {
				t.Errorf("note %s was lost", k)
			}
		}
	}
}
