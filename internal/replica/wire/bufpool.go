package wire

import (
	"math/bits"
	"sync"
)

// Frame buffers of the read reply path come from size-class pools: a 1 MiB
// read otherwise allocates (and zeroes) a fresh megabyte on the host for the
// file's bytes, another for the reply frame and a third in the client for the
// received frame.
//
// Classes are a power of two of data plus poolSlack, so a frame carrying
// 2^k bytes of data with its header fits the class of 2^k. Buffers below the
// smallest class are not worth pooling; buffers above the largest are not
// kept, which bounds what the pools can hold per class to what is in use.
const (
	poolSlack    = 4 << 10
	poolMinShift = 16 // 64 KiB
	poolMaxShift = 22 // 4 MiB: MaxData
)

var framePools [poolMaxShift - poolMinShift + 1]sync.Pool

// poolClass is the index of the smallest class holding n bytes, or -1 when
// n is outside the pooled range.
func poolClass(n int) int {
	if n <= 1<<poolMinShift+poolSlack/2 || n > 1<<poolMaxShift+poolSlack {
		return -1
	}
	d := n - poolSlack
	shift := poolMinShift
	if d > 1<<poolMinShift {
		shift = bits.Len(uint(d - 1))
	}
	return shift - poolMinShift
}

func classSize(c int) int { return 1<<(c+poolMinShift) + poolSlack }

// GetBuf returns a buffer of length n, pooled when n is in the pooled
// range. Its contents are not zeroed.
func GetBuf(n int) []byte {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := framePools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, classSize(c))
}

// PutBuf returns a buffer from GetBuf to its pool. The caller must hold no
// other reference to it. Buffers of other capacities are dropped.
func PutBuf(b []byte) {
	c := poolClass(cap(b))
	if c < 0 || cap(b) != classSize(c) {
		return
	}
	b = b[:0]
	framePools[c].Put(&b)
}
