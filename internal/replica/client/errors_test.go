package client

import (
	"context"
	"fmt"
	"syscall"
	"testing"
)

func TestToErrnoMapsOutcomesToWhatTheKernelSees(t *testing.T) {
	cases := []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{syscall.ENOSPC, syscall.ENOSPC},
		{fmt.Errorf("wrapped: %w", syscall.EEXIST), syscall.EEXIST},
		{fmt.Errorf("%w (last error: x)", ErrUncertain), syscall.EIO},
		{ErrUnavailable, syscall.EIO},
		{fmt.Errorf("%w (epoch 1): superseded", ErrFenced), syscall.EIO},
		{ErrUnauthorized, syscall.EACCES},
		{ErrProtocol, syscall.EINVAL},
		{context.Canceled, syscall.EINTR},
	}
	for _, tc := range cases {
		if got := ToErrno(tc.err); got != tc.want {
			t.Errorf("ToErrno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
