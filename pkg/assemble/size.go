package assemble

import (
	"unicode/utf8"

	"github.com/ioharness/harness/pkg/protocol"
)

// The estimate is the size of the request's JSON as encoding/json writes
// protocol.CompletionRequest{System, Messages, Tools}. Marshalling every
// candidate message would dominate the cost of assembly, so these
// functions compute the same sizes by arithmetic; the tests hold them to
// json.Marshal byte for byte.

// strExtra is what escaping adds to each ASCII byte in a JSON string:
// 1 for \" \\ \b \f \n \r \t, 5 for the other control bytes and for < > &
// (written \u00XX, as encoding/json escapes HTML).
var strExtra = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch c {
		case '"', '\\', '\b', '\f', '\n', '\r', '\t':
			t[c] = 1
		case '<', '>', '&':
			t[c] = 5
		default:
			if c < 0x20 {
				t[c] = 5
			}
		}
	}
	return t
}()

// Words of eight bytes, for testing eight bytes of a string at once.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// strLen is the size of s as a JSON string, quotes included.
func strLen(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs escaping: none is a
		// control byte, ", &, <, >, \ or outside ASCII. A byte under b
		// shows in (x - b*ones) &^ x & highs (exact for b <= 128), and a
		// byte equal to c is a zero byte of x ^ c*ones; " and & differ in
		// one bit, as < and > do, so each pair is one test.
		for i+16 <= len(s) {
			t := s[i : i+16]
			x := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
				uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
			y := uint64(t[8]) | uint64(t[9])<<8 | uint64(t[10])<<16 | uint64(t[11])<<24 |
				uint64(t[12])<<32 | uint64(t[13])<<40 | uint64(t[14])<<48 | uint64(t[15])<<56
			qa, qb := (x|0x04*ones)^(0x26*ones), (y|0x04*ones)^(0x26*ones)
			la, lb := (x|0x02*ones)^(0x3e*ones), (y|0x02*ones)^(0x3e*ones)
			ba, bb := x^('\\'*ones), y^('\\'*ones)
			bad := x | y | (x-0x20*ones)&^x | (y-0x20*ones)&^y | (qa-ones)&^qa | (qb-ones)&^qb |
				(la-ones)&^la | (lb-ones)&^lb | (ba-ones)&^ba | (bb-ones)&^bb
			if bad&highs != 0 {
				break
			}
			i += 16
		}
		if i+8 <= len(s) {
			t := s[i : i+8]
			x := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
				uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
			qa := (x | 0x04*ones) ^ (0x26 * ones) // " or &
			lg := (x | 0x02*ones) ^ (0x3e * ones) // < or >
			bs := x ^ ('\\' * ones)
			if (x|(x-0x20*ones)&^x|(qa-ones)&^qa|(lg-ones)&^lg|(bs-ones)&^bs)&highs == 0 {
				i += 8
				continue
			}
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			n += int(strExtra[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5 // one bad byte becomes \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}

// bytesLen is the size of b as JSON: base64 in quotes, or null.
func bytesLen(b []byte) int {
	if b == nil {
		return 4
	}
	return 2 + (len(b)+2)/3*4
}

// rawLen is the size of a json.RawMessage as written: compacted, or null.
// Arguments that are not JSON make json.Marshal fail; they are counted at
// their own length, which is the best there is to say of them.
func rawLen(b []byte) int {
	if b == nil {
		return 4
	}
	if !validJSON(b) {
		return len(b)
	}
	return compactLen(b)
}

// Sizes of the fixed parts of the JSON objects (keys, quotes, colons,
// commas, braces).
const (
	lenRoleKey     = len(`{"role":`) + len(`}`)
	lenContentKey  = len(`,"content":`)
	lenCallsKey    = len(`,"tool_calls":[]`)
	lenCallIDKey   = len(`,"tool_call_id":`)
	lenImagesKey   = len(`,"images":[]`)
	lenThinkingKey = len(`,"thinking":[]`)
	lenCall        = len(`{"id":,"name":,"arguments":}`)
	lenImage       = len(`{"media_type":,"data":}`)
	lenThinking    = len(`{"kind":}`)
	lenTextKey     = len(`,"text":`)
	lenSigKey      = len(`,"signature":`)
	lenDataKey     = len(`,"data":`)
	lenTool        = len(`{"name":,"description":,"parameters":}`)
	lenRequest     = len(`{"system":,"messages":[]}`)
	lenToolsKey    = len(`,"tools":[]`)
)

// callLen is the size of one tool call.
func callLen(c *protocol.ToolCall) int {
	return lenCall + strLen(c.ID) + strLen(c.Name) + rawLen(c.Arguments)
}

// msgLen is the size of one message; content is its content's strLen
// (given, since the caller usually has it already), or -1 to compute it.
func msgLen(m *protocol.Message, content int) int {
	n := lenRoleKey + strLen(m.Role)
	if m.Content != "" {
		if content < 0 {
			content = strLen(m.Content)
		}
		n += lenContentKey + content
	}
	if len(m.ToolCalls) > 0 {
		n += lenCallsKey + len(m.ToolCalls) - 1
		for i := range m.ToolCalls {
			n += callLen(&m.ToolCalls[i])
		}
	}
	if m.ToolCallID != "" {
		n += lenCallIDKey + strLen(m.ToolCallID)
	}
	if len(m.Images) > 0 {
		n += lenImagesKey + len(m.Images) - 1
		for _, im := range m.Images {
			n += lenImage + strLen(im.MediaType) + bytesLen(im.Data)
		}
	}
	if len(m.Thinking) > 0 {
		n += lenThinkingKey + len(m.Thinking) - 1
		for _, t := range m.Thinking {
			n += lenThinking + strLen(t.Kind)
			if t.Text != "" {
				n += lenTextKey + strLen(t.Text)
			}
			if t.Signature != "" {
				n += lenSigKey + strLen(t.Signature)
			}
			if t.Data != "" {
				n += lenDataKey + strLen(t.Data)
			}
		}
	}
	return n
}

// MessageLen is the size of m as encoding/json writes it.
func MessageLen(m *protocol.Message) int { return msgLen(m, -1) }

// toolResultLen is the size of a tool message with this content and call
// id, without building it.
func toolResultLen(content, callID string) int {
	n := lenRoleKey + len(`"tool"`)
	if content != "" {
		n += lenContentKey + strLen(content)
	}
	if callID != "" {
		n += lenCallIDKey + strLen(callID)
	}
	return n
}

// frameLen is the size of the request around its messages: the system
// prompt, the tools, and the messages array's brackets. Each message adds
// its size and a comma, less one comma in all (see requestLen).
func frameLen(system string, tools []protocol.ToolSpec) int {
	n := lenRequest + strLen(system)
	if len(tools) > 0 {
		n += lenToolsKey + len(tools) - 1
		for i := range tools {
			t := &tools[i]
			n += lenTool + strLen(t.Name) + strLen(t.Description) + rawLen(t.Parameters)
		}
	}
	return n
}

// requestLen is the size of the request from its frame, the sum of its
// messages' sizes and their count.
func requestLen(frame, msgs, count int) int {
	if count > 0 {
		msgs += count - 1 // the commas between them
	}
	return frame + msgs
}
