package client

import (
	"context"
	"errors"
	"syscall"
)

// Sentinel errors. Wrapped errors carry the detail; test with errors.Is.
var (
	// ErrUncertain: a mutation was sent and its outcome cannot be known.
	ErrUncertain = errors.New("uncertain result: the operation may or may not have been applied")
	// ErrUnavailable: no coordinator with a quorum answered within the
	// retry budget; nothing was applied.
	ErrUnavailable = errors.New("volume unavailable: no coordinator with a quorum")
	// ErrUnauthorized: the worker rejected the bearer token.
	ErrUnauthorized = errors.New("unauthorized: the worker rejected the bearer token")
	// ErrSessionExpired: the exactly-once session was evicted.
	ErrSessionExpired = errors.New("exactly-once session expired")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
	// ErrProtocol: the worker rejected a request as malformed.
	ErrProtocol = errors.New("protocol error")
	// ErrFenced: a newer single-writer mount of the volume opened a newer
	// fencing epoch; this client's calls are refused (nothing applied or
	// read) and will be for good.
	ErrFenced = errors.New("fenced by a newer single-writer mount of the volume")
)

// ToErrno maps an error from this package to the errno a FUSE reply carries.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	switch {
	case errors.As(err, &en):
		return en
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, ErrUnauthorized):
		return syscall.EACCES
	case errors.Is(err, ErrProtocol):
		return syscall.EINVAL
	default: // ErrFenced, ErrUncertain, ErrUnavailable, ErrClosed, deadlines
		return syscall.EIO
	}
}
