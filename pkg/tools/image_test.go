package tools

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ioharness/harness/pkg/protocol"
)

// png is the smallest PNG header http.DetectContentType recognises.
var png = append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 32)...)

func TestViewImage(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{"a.png": png, "notes.txt": []byte("hello"), "big.png": append(png, make([]byte, MaxImageBytes)...)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	env := &Env{Workspace: ws}
	out, err := ViewImage{}.Invoke(t.Context(), env, json.RawMessage(`{"path":"a.png"}`))
	if err != nil || out.Image == nil || out.Image.MediaType != "image/png" || len(out.Image.Data) != len(png) || !strings.Contains(out.Content, "attached") {
		t.Fatalf("view_image a.png = %+v, %v", out, err)
	}
	for _, tt := range []struct {
		path string
		want *protocol.Error
	}{
		{"notes.txt", protocol.ErrBadArguments},
		{"big.png", protocol.ErrBadArguments},
		{"missing.png", protocol.ErrNotFound},
		{"../a.png", protocol.ErrPathEscape},
	} {
		if _, err := (ViewImage{}).Invoke(t.Context(), env, json.RawMessage(`{"path":"`+tt.path+`"}`)); !errors.Is(err, tt.want) {
			t.Errorf("view_image %s = %v, want %v", tt.path, err, tt.want.Code)
		}
	}
}
