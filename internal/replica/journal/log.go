package journal

// The journal's log store. docs/journal-format.md is the specification;
// this is its implementation:
//
//   - segment files NNNNNNNNNNNNNNNNNNNN-SSSSSSSSSSSSSSSS.seg (a sequence
//     number and the salt of its checksums, recycle.go; journals written
//     before salts have NNNNNNNNNNNNNNNNNNNN.seg), holding frames appended in
//     index order: length uint32, CRC-32C uint32 (over the salt, the length
//     and the payload), payload (one raft.Log);
//   - one fdatasync per StoreLogs call, so a batch is durable before raft
//     acknowledges it; each batch begins with a batch marker (frame.go);
//   - on open, every segment is scanned and every frame's checksum
//     verified. A bad frame in the last segment with no valid batch marker
//     after it is a torn tail (a batch whose fdatasync never returned, so
//     never acknowledged): the segment is truncated there. A bad frame that
//     a later batch follows, a bad frame anywhere else, or a gap in the
//     index sequence between segments, is corruption and the journal
//     refuses to open.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/durable"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	frameHeader  = 8
	maxPayload   = 64 << 20
	segSuffix    = ".seg"
	stableFile   = "stable.json"
	logFixedSize = 8 + 8 + 1 + 8
)

// ErrCorrupt reports journal damage that is not a torn tail.
var ErrCorrupt = errors.New("journal corrupt")

type segment struct {
	name    segName
	f       *os.File
	first   uint64   // index of the first frame (valid when len(offsets) > 0)
	offsets []uint32 // byte offset of each frame
	size    int64    // end of the last frame (the file may hold padding after it, direct.go)
	// direct is the tail segment's O_DIRECT descriptor for appends (nil:
	// buffered appends); block holds the bytes of the block it ends in, valid
	// while blockEnd == size (direct.go).
	direct   *os.File
	block    []byte
	blockEnd int64
}

func (s *segment) last() uint64 { return s.first + uint64(len(s.offsets)) - 1 }

// Log is a raft.LogStore and raft.StableStore over segment files.
type Log struct {
	dir     string
	segSize int64

	// appendMu serialises everything that changes the segments (appends,
	// deletions, close). mu guards what readers see: an append writes and
	// fdatasyncs its frames holding only appendMu, then publishes them under
	// mu, so GetLog (raft's replication to followers) never waits for a disk
	// flush. Lock order: appendMu, then mu.
	appendMu sync.Mutex
	mu       sync.RWMutex
	segs     []*segment // ordered; the last one takes appends
	// floor hides entries raft compacted that still share a segment with
	// live ones (segments are deleted whole). It is not persisted: after a
	// restart the older entries reappear, which raft tolerates.
	floor  uint64
	stable *stableStore
	// spares are removed segments kept to be renamed into new ones
	// (recycle.go).
	spares []string
	closed bool
	// syncData makes an append durable (fdatasync; tests slow it down).
	syncData func(fd int) error
	// failing is the current run of failed appends (nil: the last one
	// succeeded). Written under appendMu, read without a lock.
	failing atomic.Pointer[AppendFailure]
	// recent holds the newest published entries (cache.go), under mu.
	recent recentCache
}

// OpenLog opens or creates the journal in dir, recovering a torn tail.
// TornBytes reports how many bytes of torn tail recovery discarded.
func OpenLog(dir string, segmentSize int64) (*Log, int64, error) {
	// Durably, or a power cut can drop the directory with every synced
	// segment in it.
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("create journal directory: %w", err)
	}
	st, err := openStable(filepath.Join(dir, stableFile))
	if err != nil {
		return nil, 0, err
	}
	l := &Log{dir: dir, segSize: segmentSize, stable: st, syncData: unix.Fdatasync}
	names, err := segmentNames(dir)
	if err != nil {
		return nil, 0, err
	}
	if l.spares, err = spareFiles(dir); err != nil {
		return nil, 0, err
	}
	var torn int64
	for i, name := range names {
		s, t, err := l.openSegment(name, i == len(names)-1)
		if err != nil {
			l.Close()
			return nil, 0, err
		}
		torn += t
		if err := l.appendSegment(s); err != nil {
			l.Close()
			return nil, 0, err
		}
	}
	if len(l.segs) == 0 {
		s, err := l.createSegment(1, true)
		if err != nil {
			return nil, 0, err
		}
		l.segs = append(l.segs, s)
	}
	l.openDirect(l.segs[len(l.segs)-1])
	return l, torn, nil
}

func (l *Log) segPath(n segName) string { return filepath.Join(l.dir, n.file()) }

// openSegment scans a segment, verifying every frame.
func (l *Log) openSegment(name segName, tail bool) (*segment, int64, error) {
	seq := name.seq
	f, err := os.OpenFile(l.segPath(name), os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open journal segment %d: %w", seq, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	s := &segment{name: name, f: f}
	var hdr [frameHeader]byte
	var off int64
	for off < fi.Size() {
		kind, idx, n, err := readFrameAt(f, off, hdr[:], fi.Size(), name.salt)
		if err == nil && kind == entryFrame && len(s.offsets) > 0 && idx != s.last()+1 {
			err = fmt.Errorf("index %d follows %d", idx, s.last())
		}
		if err != nil {
			if pad, perr := isPadding(f, off, fi.Size()); perr != nil {
				f.Close()
				return nil, 0, perr
			} else if pad {
				// What an O_DIRECT append leaves after the last frame, not a torn tail.
				if err := f.Truncate(off); err != nil {
					f.Close()
					return nil, 0, fmt.Errorf("cut journal segment %d to its frames: %w", seq, err)
				}
				s.size = off
				return s, 0, nil
			}
			if !tail {
				f.Close()
				return nil, 0, fmt.Errorf("%w: segment %d at offset %d: %v", ErrCorrupt, seq, off, err)
			}
			at, later, lerr := laterBatch(f, off, fi.Size(), name.salt)
			if lerr != nil {
				f.Close()
				return nil, 0, fmt.Errorf("scan journal segment %d: %w", seq, lerr)
			}
			if later {
				f.Close()
				return nil, 0, fmt.Errorf("%w: segment %d at offset %d: %v, before the batch written at offset %d: an acknowledged entry is damaged",
					ErrCorrupt, seq, off, err, at)
			}
			// Torn tail: discard everything from the first bad frame (in a
			// recycled segment, also what its earlier life left after it).
			torn := fi.Size() - off
			if err := f.Truncate(off); err != nil {
				f.Close()
				return nil, 0, fmt.Errorf("truncate torn journal tail: %w", err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				f.Close()
				return nil, 0, err
			}
			s.size = off
			return s, torn, nil
		}
		if kind == entryFrame {
			if len(s.offsets) == 0 {
				s.first = idx
			}
			s.offsets = append(s.offsets, uint32(off))
		}
		off += n
	}
	s.size = off
	return s, 0, nil
}

func (l *Log) appendSegment(s *segment) error {
	if len(l.segs) > 0 {
		prev := l.segs[len(l.segs)-1]
		if len(prev.offsets) == 0 {
			return fmt.Errorf("%w: empty segment %d is not the last", ErrCorrupt, prev.name.seq)
		}
		if len(s.offsets) > 0 && s.first != prev.last()+1 {
			return fmt.Errorf("%w: segment %d starts at index %d, previous ends at %d", ErrCorrupt, s.name.seq, s.first, prev.last())
		}
	}
	l.segs = append(l.segs, s)
	return nil
}

// createSegment makes the segment numbered seq, durable in the directory:
// a spare renamed under a new salt when one is kept, else a new file, which
// first (a new journal's first segment) fills with up to DefaultSegmentSize
// zeros (recycle.go says why).
func (l *Log) createSegment(seq uint64, first bool) (*segment, error) {
	salt, err := newSalt()
	if err != nil {
		return nil, err
	}
	name := segName{seq: seq, salt: salt}
	f, err := l.takeSpare(l.segPath(name))
	if err != nil {
		return nil, err
	}
	if f == nil {
		if f, err = os.OpenFile(l.segPath(name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return nil, fmt.Errorf("create journal segment: %w", err)
		}
		if first && salt != 0 {
			if err := zeroFill(f, min(l.segSize, DefaultSegmentSize)); err != nil {
				f.Close()
				return nil, err
			}
		}
	}
	if err := durable.SyncDir(l.dir); err != nil {
		f.Close()
		return nil, err
	}
	return &segment{name: name, f: f}, nil
}

// FirstIndex implements raft.LogStore.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.firstLocked(), nil
}

// firstLocked is the first visible index (0: empty).
func (l *Log) firstLocked() uint64 {
	for _, s := range l.segs {
		if len(s.offsets) > 0 {
			if l.floor > s.first && l.floor <= l.lastLocked() {
				return l.floor
			}
			return s.first
		}
	}
	return 0
}

// LastIndex implements raft.LogStore.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastLocked(), nil
}

func (l *Log) lastLocked() uint64 {
	for i := len(l.segs) - 1; i >= 0; i-- {
		if len(l.segs[i].offsets) > 0 {
			return l.segs[i].last()
		}
	}
	return 0
}

// GetLog implements raft.LogStore, verifying the frame's checksum.
func (l *Log) GetLog(index uint64, lg *raft.Log) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if index < l.floor {
		return raft.ErrLogNotFound
	}
	if l.recent.get(index, lg) {
		return nil
	}
	i := sort.Search(len(l.segs), func(i int) bool {
		s := l.segs[i]
		return len(s.offsets) == 0 || s.last() >= index
	})
	if i == len(l.segs) || len(l.segs[i].offsets) == 0 || index < l.segs[i].first {
		return raft.ErrLogNotFound
	}
	s := l.segs[i]
	off := int64(s.offsets[index-s.first])
	end := s.size
	if k := index - s.first + 1; k < uint64(len(s.offsets)) {
		end = int64(s.offsets[k])
	}
	buf := make([]byte, end-off)
	if _, err := s.f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read journal entry %d: %w", index, err)
	}
	// The next batch's marker may sit between this frame and the next one.
	n := binary.BigEndian.Uint32(buf[0:4])
	if int64(n) > int64(len(buf)-frameHeader) ||
		s.name.salt.frameCRC(buf[0:4], buf[frameHeader:frameHeader+n]) != binary.BigEndian.Uint32(buf[4:8]) {
		return fmt.Errorf("%w: entry %d fails its checksum", ErrCorrupt, index)
	}
	return decodeLog(buf[frameHeader:frameHeader+n], lg)
}

// StoreLog implements raft.LogStore.
func (l *Log) StoreLog(lg *raft.Log) error { return l.StoreLogs([]*raft.Log{lg}) }

// StoreLogs appends a batch with one fdatasync and returns only after it.
//
// The frames are written beyond the published end of the tail segment and
// synced holding appendMu alone; readers keep reading published entries
// meanwhile. Only after fdatasync returns are the frames published (under
// mu), so no reader ever sees an entry that is not durable.
func (l *Log) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	err := l.storeLogs(logs)
	l.noteAppend(err)
	return err
}

// AppendFailure is the error of the last append and since when appends
// have failed, or nil once one succeeds. raft only logs a follower's failed
// append and answers the coordinator "no"; this is how the worker learns it.
type AppendFailure struct {
	Err   error
	Since time.Time
}

// Failing reports the current run of failed appends, or nil.
func (l *Log) Failing() *AppendFailure { return l.failing.Load() }

func (l *Log) noteAppend(err error) {
	switch {
	case err == nil:
		if l.failing.Load() != nil {
			l.failing.Store(nil)
		}
	case l.failing.Load() == nil:
		l.failing.Store(&AppendFailure{Err: err, Since: time.Now()})
	default:
		l.failing.Store(&AppendFailure{Err: err, Since: l.failing.Load().Since})
	}
}

// storeLogs appends holding appendMu.
func (l *Log) storeLogs(logs []*raft.Log) error {
	// appendMu excludes every writer of segs, so they are read here without mu.
	if l.closed {
		return errors.New("journal closed")
	}
	last := l.lastLocked()
	for i, lg := range logs {
		if (last != 0 || i > 0) && lg.Index != last+1 {
			return fmt.Errorf("journal append of index %d after %d: indexes must be contiguous", lg.Index, last)
		}
		last = lg.Index
	}
	tail := l.segs[len(l.segs)-1]
	if tail.size >= l.segSize && len(tail.offsets) > 0 {
		// Cut the padding and sync before the next segment exists: only the
		// tail segment may end in anything but a frame.
		if err := tail.settle(); err != nil {
			return err
		}
		if err := unix.Fdatasync(int(tail.f.Fd())); err != nil {
			return err
		}
		next, err := l.createSegment(tail.name.seq+1, false)
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.segs = append(l.segs, next)
		l.mu.Unlock()
		tail = next
		l.openDirect(tail)
	}
	vec := newBatchVec(logs, tail.name.salt)
	vec.marker(tail.size)
	offs := make([]uint32, 0, len(logs))
	for _, lg := range logs {
		offs = append(offs, uint32(tail.size+int64(vec.log(lg))))
	}
	iov, n := vec.done()
	if tail.size+int64(n) > 1<<32-1 {
		return fmt.Errorf("journal segment would exceed 4 GiB")
	}
	var err error
	if tail.direct != nil {
		err = tail.appendDirect(iov, n)
	} else {
		err = pwriteAll(tail.f, iov, tail.size)
	}
	if err != nil {
		return fmt.Errorf("append to journal: %w", err)
	}
	if err := l.syncData(int(tail.f.Fd())); err != nil {
		return fmt.Errorf("sync journal: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(tail.offsets) == 0 {
		tail.first = logs[0].Index
	}
	tail.offsets = append(tail.offsets, offs...)
	tail.size += int64(n)
	l.recent.add(logs, time.Now())
	return nil
}

// Close closes the segment files.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	var err error
	for _, s := range l.segs {
		err = errors.Join(err, s.settle())
		s.close()
	}
	return err
}

var _ raft.LogStore = (*Log)(nil)
var _ raft.MonotonicLogStore = (*Log)(nil)
var _ raft.StableStore = (*Log)(nil)
