package fuse

import (
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// frameRead answers a READ with the data where the client received it (in
// the reply frame's pooled buffer), and returns that buffer to its pool once
// go-fuse has written the reply to the kernel: no copy between the TLS
// decryption and the /dev/fuse write.
type frameRead struct {
	data  []byte
	frame []byte
}

func framedRead(data, frame []byte) fuse.ReadResult {
	if frame == nil {
		return fuse.ReadResultData(data)
	}
	return &frameRead{data: data, frame: frame}
}

func (r *frameRead) Size() int { return len(r.data) }

func (r *frameRead) Bytes([]byte) ([]byte, fuse.Status) { return r.data, fuse.OK }

// Slices makes go-fuse write the reply with writev from data (its vectored
// path) on every configuration, and call Done only after that write; its
// copying path calls Done before writing the bytes Bytes returned.
func (r *frameRead) Slices() ([][]byte, fuse.Status) { return [][]byte{r.data}, fuse.OK }

// Done is called once, after the reply is written (or abandoned).
func (r *frameRead) Done() {
	if r.frame != nil {
		wire.PutBuf(r.frame)
		r.frame, r.data = nil, nil
	}
}
