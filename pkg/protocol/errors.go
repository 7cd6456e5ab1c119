package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Code identifies a class of error that crosses the wire. Codes are stable:
// a client matches on the code, never on the message.
type Code int

// The code table. Ranges: 1xxx input (the caller must change what it sent),
// 2xxx run (the run could not go on), 3xxx provider, 4xxx workspace and
// sandbox, 5xxx internal and dependency.
const (
	CodeMalformed         Code = 1000 // the payload is not valid JSON of the expected shape
	CodeUnknownField      Code = 1001 // a field the schema does not define
	CodeSchemaVersion     Code = 1002 // a schema this build does not speak
	CodeMissingField      Code = 1003 // a required field is absent or empty
	CodeInvalidField      Code = 1004 // a field is present but its value is not allowed
	CodeTooLarge          Code = 1005 // the payload exceeds the size limit
	CodeUnsupported       Code = 1006 // a valid request this build or node cannot serve
	CodeUnknownRun        Code = 2001 // no run has that id
	CodeRunFinished       Code = 2002 // the run has already reached its outcome
	CodeFenced            Code = 2003 // another coordinator owns the run now
	CodeBudgetExhausted   Code = 2004 // a budget left no room for the request
	CodeRefused           Code = 2005 // the policy refused what the run needs
	CodeProviderTransport Code = 3001
	CodeProviderTimeout   Code = 3002
	CodeRateLimited       Code = 3003
	CodeProviderServer    Code = 3004
	CodeProviderAuth      Code = 3005
	CodeProviderRequest   Code = 3006
	CodeProviderMalformed Code = 3007
	CodeContextOverflow   Code = 3008
	CodeUnrecorded        Code = 3009 // a replayed provider has no answer for the request
	CodeQuotaExhausted    Code = 3010 // the provider account's quota or credit is used up
	CodePathEscape        Code = 4001 // a path resolves outside the workspace
	CodeNotFound          Code = 4002 // a file or workspace does not exist
	CodeBadArguments      Code = 4003 // a tool call's arguments do not fit its schema
	CodeSandbox           Code = 4004 // the sandbox could not start the command
	CodeWorkspaceRefused  Code = 4005 // the sandboxer does not serve that workspace
	CodeMCP               Code = 4006 // an MCP server could not start, connect, or died
	CodeUnavailable       Code = 5001 // a dependency did not answer; try again
	CodeInternal          Code = 5002 // a bug: the log has the detail
)

var codeNames = map[Code]string{
	CodeMalformed:         "malformed",
	CodeUnknownField:      "unknown_field",
	CodeSchemaVersion:     "schema_version",
	CodeMissingField:      "missing_field",
	CodeInvalidField:      "invalid_field",
	CodeTooLarge:          "too_large",
	CodeUnsupported:       "unsupported",
	CodeUnknownRun:        "unknown_run",
	CodeRunFinished:       "run_finished",
	CodeFenced:            "fenced",
	CodeBudgetExhausted:   "budget_exhausted",
	CodeRefused:           "refused",
	CodeProviderTransport: "provider_transport",
	CodeProviderTimeout:   "provider_timeout",
	CodeRateLimited:       "rate_limited",
	CodeProviderServer:    "provider_server",
	CodeProviderAuth:      "provider_auth",
	CodeProviderRequest:   "provider_request",
	CodeProviderMalformed: "provider_malformed",
	CodeContextOverflow:   "context_overflow",
	CodeUnrecorded:        "unrecorded",
	CodeQuotaExhausted:    "quota_exhausted",
	CodePathEscape:        "path_escape",
	CodeNotFound:          "not_found",
	CodeBadArguments:      "bad_arguments",
	CodeSandbox:           "sandbox",
	CodeWorkspaceRefused:  "workspace_refused",
	CodeMCP:               "mcp",
	CodeUnavailable:       "unavailable",
	CodeInternal:          "internal",
}

// retryable says which codes are worth trying again unchanged. It is decided
// here, once, and travels with the error.
var retryable = map[Code]bool{
	CodeFenced:            false,
	CodeProviderTransport: true,
	CodeProviderTimeout:   true,
	CodeRateLimited:       true,
	CodeProviderServer:    true,
	CodeProviderMalformed: true,
	CodeUnavailable:       true,
}

// String returns the code's stable name, such as "unknown_field".
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("code_%d", int(c))
}

// Retryable reports whether an error of this code may succeed if tried again
// unchanged.
func (c Code) Retryable() bool { return retryable[c] }

// Error is the error type that crosses the wire. Field names the offending
// field in dotted form ("budget.max_wall") when there is one; Hint says what
// to do about it. RetryAfterMS carries a server's requested wait, if any.
// Retry, when set, is the server's own word on whether to try again (the
// x-should-retry header), which overrides what the code says.
type Error struct {
	Code         Code   `json:"code"`
	Name         string `json:"name"`
	Field        string `json:"field,omitempty"`
	Message      string `json:"message"`
	Hint         string `json:"hint,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Retry        *bool  `json:"retry,omitempty"`
}

// Sentinels to match with errors.Is; they compare by code only.
var (
	ErrMalformed         = &Error{Code: CodeMalformed}
	ErrUnknownField      = &Error{Code: CodeUnknownField}
	ErrSchemaVersion     = &Error{Code: CodeSchemaVersion}
	ErrMissingField      = &Error{Code: CodeMissingField}
	ErrInvalidField      = &Error{Code: CodeInvalidField}
	ErrTooLarge          = &Error{Code: CodeTooLarge}
	ErrUnsupported       = &Error{Code: CodeUnsupported}
	ErrUnknownRun        = &Error{Code: CodeUnknownRun}
	ErrRunFinished       = &Error{Code: CodeRunFinished}
	ErrFenced            = &Error{Code: CodeFenced}
	ErrBudgetExhausted   = &Error{Code: CodeBudgetExhausted}
	ErrRefused           = &Error{Code: CodeRefused}
	ErrProviderTransport = &Error{Code: CodeProviderTransport}
	ErrProviderTimeout   = &Error{Code: CodeProviderTimeout}
	ErrRateLimited       = &Error{Code: CodeRateLimited}
	ErrProviderServer    = &Error{Code: CodeProviderServer}
	ErrProviderAuth      = &Error{Code: CodeProviderAuth}
	ErrProviderRequest   = &Error{Code: CodeProviderRequest}
	ErrProviderMalformed = &Error{Code: CodeProviderMalformed}
	ErrContextOverflow   = &Error{Code: CodeContextOverflow}
	ErrUnrecorded        = &Error{Code: CodeUnrecorded}
	ErrQuotaExhausted    = &Error{Code: CodeQuotaExhausted}
	ErrPathEscape        = &Error{Code: CodePathEscape}
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrBadArguments      = &Error{Code: CodeBadArguments}
	ErrSandbox           = &Error{Code: CodeSandbox}
	ErrWorkspaceRefused  = &Error{Code: CodeWorkspaceRefused}
	ErrMCP               = &Error{Code: CodeMCP}
	ErrUnavailable       = &Error{Code: CodeUnavailable}
	ErrInternal          = &Error{Code: CodeInternal}
)

// Errorf returns an *Error of the given code with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Name: code.String(), Message: fmt.Sprintf(format, args...)}
}

// FieldError returns an *Error about one field, with a hint for the fix.
func FieldError(code Code, field, hint, format string, args ...any) *Error {
	e := Errorf(code, format, args...)
	e.Field = field
	e.Hint = hint
	return e
}

func (e *Error) Error() string {
	s := e.Code.String()
	if e.Field != "" {
		s += " " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Is matches by code, so a sentinel matches an error decoded from the wire.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Retryable reports whether the error may succeed if tried again
// unchanged: Retry when the server said, else what its code says.
func (e *Error) Retryable() bool {
	if e.Retry != nil {
		return *e.Retry
	}
	return e.Code.Retryable()
}

// MarshalJSON fills Name from Code so the wire form is always complete.
func (e *Error) MarshalJSON() ([]byte, error) {
	type plain Error
	p := plain(*e)
	p.Name = e.Code.String()
	return json.Marshal(p)
}

// AsError returns err as an *Error: itself if it is one (or wraps one),
// otherwise an internal error carrying err's text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return Errorf(CodeInternal, "%s", err.Error())
}
