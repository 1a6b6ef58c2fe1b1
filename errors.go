package precept

import (
	"errors"
	"fmt"
)

// Code classifies an error for callers: handlers turn it into a transport
// status, the CLI into an exit message.
type Code string

// Error codes. Internal is the default for errors that carry no code: their
// text is logged but never shown to a client.
const (
	Internal           Code = "internal"
	Invalid            Code = "invalid"
	NotFound           Code = "not_found"
	Conflict           Code = "conflict"
	PermissionDenied   Code = "permission_denied"
	Unauthenticated    Code = "unauthenticated"
	Unavailable        Code = "unavailable"
	FailedPrecondition Code = "failed_precondition"
	ResourceExhausted  Code = "resource_exhausted"
)

// Sentinel errors callers branch on with errors.Is.
var (
	ErrNotFound = &Error{Code: NotFound, Message: "not found"}
	ErrConflict = &Error{Code: Conflict, Message: "conflict"}
)

// Error is a domain error whose Message is safe to show to a client.
type Error struct {
	Code    Code
	Message string
	// Err is the underlying cause; it is logged, not shown.
	Err error
}

// Errorf returns an *Error with a client-safe message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) true for any not-found *Error (and
// likewise for ErrConflict), so callers need not compare messages.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound, ErrConflict:
		return e.Code == target.(*Error).Code
	}
	return false
}

// ErrorCode returns the code of the first *Error in err's chain, or
// Internal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// ErrorMessage returns the client-safe message of the first *Error in err's
// chain, or a generic message for internal errors.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != Internal {
		return e.Message
	}
	return "internal error"
}
