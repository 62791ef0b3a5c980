package chunkstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cellfleet/cellfleet/internal/durable"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

const (
	// DefaultChunkSize is decision 0010's candidate; 4 MiB is measured
	// against it (bench_test.go, docs/performance.md).
	DefaultChunkSize = 1 << 20
	// BlockSize is the span of one CRC-32C of a verified read.
	BlockSize = 64 << 10
	// MaxChunkSize bounds the chunk size a store may record.
	MaxChunkSize = 64 << 20
	// DefaultRetain is how many manifests a Persist keeps (raft keeps two
	// checkpoints, internal/replica/worker.go).
	DefaultRetain = 2
	// maxGeneration bounds versions and manifest IDs read from the disk.
	maxGeneration = 1 << 62
	// maxIO bounds one read or write (the wire's is 4 MiB; a digest or a
	// transfer may read more at once).
	maxIO = 64 << 20
)

// ErrCorrupt is wrapped by every error for data or a manifest that fails
// its checksum: such bytes are never returned.
var ErrCorrupt = errors.New("chunk store: corrupt")

// Options configures Open.
type Options struct {
	// ChunkSize is the chunk size of a new store (0: DefaultChunkSize). An
	// existing store keeps the size it recorded; a different non-zero
	// value is refused.
	ChunkSize int
	// Retain is how many manifests Persist and Adopt keep, newest first
	// (0: DefaultRetain). DropManifest removes one sooner.
	Retain int
}

// Stats counts the store's disk work since Open.
type Stats struct {
	Cloned  uint64 // chunk versions made by a reflink of the previous one
	Copied  uint64 // chunk versions made by copying the previous one's bytes
	Synced  uint64 // chunk files fdatasync'd (Persist, Install)
	Hashed  uint64 // chunks checksummed by Persist
	Removed uint64 // chunk files removed
}

type counters struct{ cloned, copied, synced, hashed, removed atomic.Uint64 }

// Store is one replica's chunk store.
type Store struct {
	dir       string
	chunkSize uint64
	retain    int

	mu        sync.RWMutex
	gen       uint64                 // the next version or capture ID
	files     map[uint64]*fileMap    // the live maps
	kept      map[uint64]*Manifest   // kept manifests by ID
	captures  map[*Capture]struct{}  // unreleased captures and open manifests
	pinned    uint64                 // the highest ID of kept or captures (cow.go)
	sums      map[chunkKey]*chunkSum // checksums of persisted and installed chunks
	installed map[chunkKey]struct{}  // received chunks awaiting Adopt
	dirs      map[uint64]bool        // chunk directories known to exist
	handles   map[chunkKey]*os.File  // open live chunks, under the write lock
	refused   []error                // manifests Open refused
	stats     counters
	bufs      sync.Pool // *[]byte of chunkSize: verified reads, checksums
}

// Open opens the store in dir, creating it when dir holds none. The live
// maps are the newest verified manifest's; chunks nothing references are
// removed. Manifests that fail to verify are removed and reported by
// Refused.
func Open(dir string, opt Options) (*Store, error) {
	if opt.ChunkSize != 0 {
		if err := validChunkSize(opt.ChunkSize); err != nil {
			return nil, fmt.Errorf("open chunk store %s: %w", dir, err)
		}
	}
	if opt.Retain < 0 || opt.Retain > 64 {
		return nil, fmt.Errorf("open chunk store %s: retain %d: want 0 to 64", dir, opt.Retain)
	}
	size, err := prepare(dir, opt.ChunkSize)
	if err != nil {
		return nil, fmt.Errorf("open chunk store %s: %w", dir, err)
	}
	s := &Store{dir: dir, chunkSize: uint64(size), retain: cmpOr(opt.Retain, DefaultRetain), gen: 1,
		files: map[uint64]*fileMap{}, kept: map[uint64]*Manifest{}, captures: map[*Capture]struct{}{},
		sums: map[chunkKey]*chunkSum{}, installed: map[chunkKey]struct{}{}, dirs: map[uint64]bool{},
		handles: map[chunkKey]*os.File{}}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("open chunk store %s: %w", dir, err)
	}
	if err := s.collect(true); err != nil {
		return nil, fmt.Errorf("open chunk store %s: %w", dir, err)
	}
	return s, nil
}

// prepare creates the store's layout when dir holds no store and returns
// its chunk size.
func prepare(dir string, want int) (int, error) {
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	size, found, err := readFormat(dir)
	if err != nil {
		return 0, err
	}
	if found {
		if want != 0 && want != size {
			return 0, fmt.Errorf("%w: the store's chunk size is %d, not %d", ErrFormat, size, want)
		}
		return size, nil
	}
	// No marker: a new store, or one whose creation a crash cut short
	// (the marker is written last). One with manifests is neither.
	ents, err := os.ReadDir(filepath.Join(dir, manifestsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if len(ents) > 0 {
		return 0, fmt.Errorf("%w: %s holds manifests but no format marker", ErrFormat, dir)
	}
	size = cmpOr(want, DefaultChunkSize)
	return size, createLayout(dir, size)
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// ChunkSize returns the store's chunk size in bytes.
func (s *Store) ChunkSize() int { return int(s.chunkSize) }

// maxIndex is the index of the chunk holding the largest file's last byte.
func (s *Store) maxIndex() uint64 { return (wire.MaxFileSize - 1) / s.chunkSize }

// Refused returns why Open refused each manifest it removed.
func (s *Store) Refused() []error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]error(nil), s.refused...)
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{Cloned: s.stats.cloned.Load(), Copied: s.stats.copied.Load(), Synced: s.stats.synced.Load(),
		Hashed: s.stats.hashed.Load(), Removed: s.stats.removed.Load()}
}

// Close closes the open chunk files. Unreleased captures must not be read
// after it.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for k, fh := range s.handles {
		if err := fh.Close(); err != nil && first == nil {
			first = fmt.Errorf("close chunk %s: %w", s.chunkPath(k), err)
		}
		delete(s.handles, k)
	}
	return first
}

// bumpGeneration returns the current generation and starts the next.
func (s *Store) bumpGeneration() uint64 {
	g := s.gen
	s.gen++
	return g
}

// uniqueVersion returns a version no chunk holds or will take: live writes
// make chunks at the current generation, so it skips past it.
func (s *Store) uniqueVersion() uint64 {
	s.gen += 2
	return s.gen - 1
}
