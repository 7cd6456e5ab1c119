package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ioharness/harness/pkg/protocol"
)

// MaxImageBytes bounds one image view_image attaches.
const MaxImageBytes = 5 << 20

// imageTypes are the media types models take.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// ViewImage is the view_image tool: it attaches an image from the
// workspace to the model's next request. It is not among Builtins: offer it
// (NewSet, or the sandboxer's --images) where the models take images; a
// worker whose provider does not refuses the request before any spend.
type ViewImage struct{}

var viewImageParams = params{
	{name: "path", kind: kindString, required: true, desc: "Image to look at (PNG, JPEG, GIF or WebP, at most 5 MB), relative to the workspace root."},
}

// ReadOnly marks ViewImage as changing nothing.
func (ViewImage) ReadOnly() {}

// InProcess marks ViewImage as working on files in this process alone.
func (ViewImage) InProcess() {}

// Spec describes view_image.
func (ViewImage) Spec() protocol.ToolSpec {
	return protocol.ToolSpec{
		Name:        "view_image",
		Description: "Look at an image in the workspace: it is attached to your next turn.",
		Parameters:  viewImageParams.schema(),
	}
}

// Invoke reads the image, judged as read_file is (Env.ReadFile). Errors:
// bad arguments; those of Env.ReadFile; CodeBadArguments for a file that
// is not a PNG, JPEG, GIF or WebP image, or is larger than MaxImageBytes.
func (ViewImage) Invoke(ctx context.Context, env *Env, raw json.RawMessage) (*Output, error) {
	a, err := viewImageParams.decode("view_image", raw)
	if err != nil {
		return nil, err
	}
	w, err := env.workspace("view_image")
	if err != nil {
		return nil, err
	}
	path := a.str("path")
	data, err := env.readFile(w, path)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxImageBytes {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "path", "make a smaller copy, or crop it",
			"%s is %d bytes; images are at most %d", path, len(data), MaxImageBytes)
	}
	mt := http.DetectContentType(data)
	if !imageTypes[mt] {
		return nil, protocol.FieldError(protocol.CodeBadArguments, "path", "give a PNG, JPEG, GIF or WebP file",
			"%s is %s, not an image a model takes", path, mt)
	}
	return &Output{Content: fmt.Sprintf("%s (%s, %d bytes) is attached to your next turn.", path, mt, len(data)),
		Image: &protocol.Image{MediaType: mt, Data: data}}, nil
}
