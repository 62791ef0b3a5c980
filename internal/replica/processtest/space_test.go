package processtest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// Deleting a file gives its chunks back on every replica within 60 s, also
// on a volume no write follows: the kept checkpoints name the deleted
// file's chunks, and only the second checkpoint after the deletion, which
// an idle volume would never take, frees them (docs/replica-engine.md,
// "Chunk store").
func TestDeletedFileSpaceComesBackOnAnIdleVolume(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "big")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const size, piece = 96 << 20, 4 << 20
	data := bytes.Repeat([]byte{7}, piece)
	for off := 0; off < size; off += piece {
		if _, err := cl.Write(ctx, ino, uint64(off), data); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	chunks := func(i int) int64 { return dirBytes(filepath.Join(c.dataDir(i), "store", "chunks")) }
	// Every replica checkpoints the file, so kept checkpoints name its
	// chunks; each replica applies the writes on its own time.
	poll.UntilTrue(t, 30*time.Second, "every replica applied the file", func() bool {
		for i := range c.peers {
			if chunks(i) < size {
				return false
			}
		}
		return true
	})
	for i := range c.peers {
		if code, body := c.post(i, fmt.Sprintf("/v1/workers/%s/%s/checkpoint", volume, c.peers[i].ID), nil); code != http.StatusNoContent {
			t.Fatalf("checkpoint r%d: %d %s", i, code, body)
		}
	}
	if err := cl.Unlink(ctx, client.RootIno, "big"); err != nil {
		t.Fatal(err)
	}
	const left = 4 << 20
	start := time.Now()
	poll.UntilTrue(t, 60*time.Second, "every replica gave the deleted file's chunks back", func() bool {
		for i := range c.peers {
			if chunks(i) > left {
				return false
			}
		}
		return true
	})
	t.Logf("the deleted file's %d MiB came back on every replica in %v", size>>20, time.Since(start).Round(100*time.Millisecond))
}
