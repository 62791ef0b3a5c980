package e2e

// The old node's mount after a drain (docs/fuse.md, "Fencing"). Once the
// writer Pod is gone the kubelet unstages the old node's mount, often before
// the new node mounts, so a write "through the old mount" needs something on
// the old node that outlives the Pod: a descriptor kept open there, as an
// application of a node that goes on running keeps its files. This host
// opens a file through the old node's staging mount and holds it across the
// drain. NodeUnstage then finds the mount busy and detaches it lazily
// (internal/fuse, Mount.Unmount): the old FUSE session goes on serving that
// descriptor with the old fencing epoch until it is closed, which is exactly
// what a fenced node can still attempt.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// fenceProbeName is the file written through the old mount, at the volume's
// root beside storagesim's log and files directory (storagesim reads only
// its own).
const fenceProbeName = "fence-probe"

// heldDescriptor is fenceProbeName opened through one node's mount of the
// volume and kept open.
type heldDescriptor struct {
	node    string
	f       *os.File
	written []byte // written and fsynced through it before the drain
}

// holdMount creates fenceProbeName through node's staging mount of the
// volume (target, from the mount owner's session record), writes a line
// and fsyncs it, and keeps the file open until close (at the latest when
// the test ends).
func (s *volumeScenario) holdMount(node, target string) *heldDescriptor {
	s.t.Helper()
	path := s.inNode(node, filepath.Join(target, fenceProbeName))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		s.t.Fatalf("create %s through %s's mount of %s (%s): %v", fenceProbeName, node, s.volume, path, err)
	}
	h := &heldDescriptor{node: node, f: f, written: fmt.Appendf(nil, "written and fsynced through %s's mount before the drain\n", node)}
	s.t.Cleanup(func() { _ = h.close() })
	if _, err := f.WriteAt(h.written, 0); err != nil {
		s.t.Fatalf("write %s through %s's mount before the drain: %v", fenceProbeName, node, err)
	}
	if err := f.Sync(); err != nil {
		s.t.Fatalf("fsync %s through %s's mount before the drain: %v", fenceProbeName, node, err)
	}
	return h
}

// close closes the descriptor once; the old mount's lazy unmount can only
// finish after it.
func (h *heldDescriptor) close() error {
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}

// requireFenced writes through the held descriptor once newNode's mount
// (newMount, from its owner's session record) has opened a newer fencing
// epoch, and requires the write refused with EIO: at the write (the old
// mount's gate is shut) or, when write-behind had queued it, at its fsync.
// It then closes the descriptor, so nothing of the old mount is pending,
// and requires the file, read through newNode's mount, to hold exactly what
// was fsynced before the drain: the refused write never landed, the
// acknowledged one was kept.
func (s *volumeScenario) requireFenced(h *heldDescriptor, newNode string, newMount mountSession) {
	s.t.Helper()
	late := fmt.Appendf(nil, "written through %s's mount after %s's mount opened fencing epoch %d: must never reach the volume\n",
		h.node, newNode, newMount.FencingEpoch)
	_, werr := h.f.WriteAt(late, 0)
	serr := h.f.Sync()
	cerr := h.close()
	s.t.Logf("through the old mount on %s after %s's opened epoch %d: write: %v; fsync: %v; close: %v",
		h.node, newNode, newMount.FencingEpoch, werr, serr, cerr)
	switch {
	case werr == nil && serr == nil:
		s.t.Fatalf("a write through %s's old mount was acknowledged (write and fsync returned 0) after %s's mount opened fencing epoch %d: the old node can still write the volume",
			h.node, newNode, newMount.FencingEpoch)
	case werr != nil && !errors.Is(werr, syscall.EIO):
		s.t.Fatalf("a write through %s's old mount after the move failed with %v, not EIO (docs/fuse.md, \"Fencing\")", h.node, werr)
	case werr == nil && !errors.Is(serr, syscall.EIO):
		s.t.Fatalf("a write through %s's old mount after the move was queued and its fsync failed with %v, not EIO (docs/fuse.md, \"Fencing\")",
			h.node, serr)
	}
	path := s.inNode(newNode, filepath.Join(newMount.Target, fenceProbeName))
	got, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatalf("read %s through %s's mount of %s (%s): %v", fenceProbeName, newNode, s.volume, path, err)
	}
	if !bytes.Equal(got, h.written) {
		s.t.Fatalf("%s reads %q through %s's mount, want exactly %q, fsynced through %s's before the drain: the write its mount refused reached the volume, or the acknowledged one was lost",
			fenceProbeName, got, newNode, h.written, h.node)
	}
}
