package chunkstore

// Captures: what a checkpoint or a digest reads while applies go on
// (decision 0010, item 2; today fsm/capture.go hard-links every backing
// file instead). A capture holds the live maps as they were and pins every
// chunk they name (cow.go) until it is released.

import (
	"fmt"
	"maps"
	"sync"
)

// Capture is the files' chunks at one moment: taken by Capture, or a kept
// manifest opened by OpenManifest (a view that pins the manifest's chunks
// while a follower is sent them, even if the manifest is dropped
// meanwhile).
type Capture struct {
	s        *Store
	id       uint64
	index    uint64
	files    map[uint64]*fileMap
	manifest *Manifest // set for a view of a kept manifest
	released bool      // guarded by s.mu
	once     sync.Once
}

// Capture records the live maps, labelled with the caller's index (the
// applied log index), and starts a new generation: O(files), no system
// call. The caller must Release it.
func (s *Store) Capture(index uint64) *Capture {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Capture{s: s, id: s.bumpGeneration(), index: index, files: maps.Clone(s.files)}
	s.captures[c] = struct{}{}
	s.repin()
	return c
}

// ID returns the capture's generation: the ID of the manifest Persist
// writes of it.
func (c *Capture) ID() uint64 { return c.id }

// Index returns the caller's label given to Capture.
func (c *Capture) Index() uint64 { return c.index }

// Manifest returns the kept manifest a view opened by OpenManifest shows
// (nil for a capture). It must not be changed.
func (c *Capture) Manifest() *Manifest { return c.manifest }

// ReadAt fills p with file ino's bytes at off as captured; holes read as
// zeros, checksummed chunks are verified.
func (c *Capture) ReadAt(ino uint64, p []byte, off uint64) error {
	if err := checkRange(ino, off, len(p)); err != nil {
		return fmt.Errorf("read inode %d: %w", ino, err)
	}
	c.s.mu.RLock()
	released := c.released
	c.s.mu.RUnlock()
	if released {
		return fmt.Errorf("capture %d: read after release", c.id)
	}
	return c.s.readMap(c.files[ino], ino, p, off, c.s.lockedSum)
}

// Release unpins the capture's chunks; it must not be read after.
// Releasing twice is harmless.
func (c *Capture) Release() {
	c.once.Do(func() {
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		c.released = true
		delete(c.s.captures, c)
		c.s.repin()
	})
}
