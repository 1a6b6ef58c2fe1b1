package api

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
)

var codes = map[precept.Code]connect.Code{
	precept.Invalid:            connect.CodeInvalidArgument,
	precept.NotFound:           connect.CodeNotFound,
	precept.Conflict:           connect.CodeAborted,
	precept.FailedPrecondition: connect.CodeFailedPrecondition,
	precept.PermissionDenied:   connect.CodePermissionDenied,
	precept.Unauthenticated:    connect.CodeUnauthenticated,
	precept.Unavailable:        connect.CodeUnavailable,
	precept.ResourceExhausted:  connect.CodeResourceExhausted,
}

// toConnect turns a domain error into a Connect error whose message is
// safe for clients; internal errors are logged with the procedure and
// shown only as "internal error".
func toConnect(ctx context.Context, log *slog.Logger, procedure string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, errors.New("request canceled"))
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded"))
	}
	code, ok := codes[precept.ErrorCode(err)]
	if !ok {
		log.ErrorContext(ctx, "request failed", "procedure", procedure, "err", err)
		return connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
	return connect.NewError(code, errors.New(precept.ErrorMessage(err)))
}

// invalid returns an InvalidArgument error naming the field.
func invalid(field, format string, args ...any) error {
	return precept.Errorf(precept.Invalid, field+": "+format, args...)
}

// pageSize applies a listing's default and maximum.
func pageSize(n int32, def, max int) (int, error) {
	switch {
	case n < 0:
		return 0, invalid("page_size", "must not be negative")
	case n == 0:
		return def, nil
	case int(n) > max:
		return 0, invalid("page_size", "%d is more than the maximum of %d", n, max)
	}
	return int(n), nil
}
