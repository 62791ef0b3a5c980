package fuse

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Cache settings. A single-writer volume (ReadWriteOnce, ReadWriteOncePod)
// has exactly one mount, so nothing but this kernel changes it: the kernel may
// keep names and pages for as long as it likes, and this mount invalidates
// what it changes itself. docs/performance.md (## FUSE mount) records the
// stat rate these settings buy.
const (
	singleWriterEntryTTL = time.Hour
	// singleWriterAttrTTL bounds the kernel's attributes and negative
	// entries, and through the attributes its pages (auto_inval_data: a read
	// asks for them again once they expire), to less than the fencing lease.
	// A mount whose owner was killed cannot drop its caches (fence.go), so
	// only their expiry stops a descriptor still open on it from reading a
	// page or a missing name after the next mount, which waits out the lease
	// before it serves, has written (docs/fuse.md, "Fencing"). A cached
	// positive name is harmless: every use of it needs the attributes or a
	// request, which the dead mount answers ENOTCONN.
	singleWriterAttrTTL = time.Second
	// sharedTTL is zero: on a volume several mounts write, every stat and
	// path walk asks the coordinator, and pages are dropped at each open
	// (close-to-open consistency).
	sharedTTL = 0
)

// Transfer settings, each measured in docs/performance.md (## FUSE mount).
const (
	// MaxWrite is the largest WRITE and READ request the kernel sends: 1 MiB,
	// the kernel's own ceiling (fs.fuse.max_pages_limit = 256 pages).
	MaxWrite = 1 << 20
	// MaxReadAhead lets sequential reads arrive as 1 MiB requests.
	MaxReadAhead = 1 << 20
	// minTransfer is the smallest MaxWrite or MaxReadAhead a mount accepts.
	minTransfer = 4 << 10
	// maxBackground is how many asynchronous requests (readahead, and
	// writeback when enabled) the kernel keeps in flight.
	maxBackground = 64
)

// Options configures one mount.
type Options struct {
	// Volume names the volume in logs and in the mount table ("cellfleet:<volume>").
	Volume string
	// SingleWriter enables attribute, entry and page caching (see above).
	SingleWriter bool
	// ReadOnly mounts read-only: every mutation answers EROFS.
	ReadOnly bool
	// OwnerKey identifies this mount's holder (the node) in orphan names,
	// so that a later mount on the same node removes what a crashed one
	// left behind, and never another node's. Default: the host name.
	OwnerKey string
	// Batch bounds write batching; zero fields take the defaults.
	Batch BatchOptions
	// WritebackBytes bounds the data a single-writer mount holds queued
	// for commit (write-behind, see writeback.go); 0 takes the default
	// (32 MiB), negative turns write-behind off (every WRITE waits for its
	// commit, as on shared volumes).
	WritebackBytes int
	// MaxWrite and MaxReadAhead override the transfer settings above
	// (between 4 KiB and 1 MiB; 0 takes the default); they exist to measure
	// the defaults.
	MaxWrite, MaxReadAhead int
	// ReadAheadWindow is the kernel's readahead window for the mount
	// (readahead.go); 0 takes ReadAheadWindow, negative leaves the kernel's
	// default (128 KiB), which exists to measure the default.
	ReadAheadWindow int
	// NoNameCache turns off answering lookups of absent names from the
	// single-writer mount's own record of a directory (names.go); it exists
	// to measure what that cache buys.
	NoNameCache bool
	// Debug logs every FUSE request.
	Debug  bool
	Logger *slog.Logger
}

func (o *Options) withDefaults() (Options, error) {
	opt := *o
	if opt.Volume == "" {
		return opt, errors.New("fuse options: volume name is required")
	}
	if strings.ContainsAny(opt.Volume, ", \t\n") {
		return opt, fmt.Errorf("fuse options: volume name %q must not contain commas or spaces", opt.Volume)
	}
	if opt.OwnerKey == "" {
		h, err := os.Hostname()
		if err != nil {
			return opt, fmt.Errorf("fuse options: owner key: %w", err)
		}
		opt.OwnerKey = h
	}
	if strings.ContainsAny(opt.OwnerKey, "/.\x00") {
		opt.OwnerKey = strings.NewReplacer("/", "_", ".", "_", "\x00", "_").Replace(opt.OwnerKey)
	}
	for _, v := range []*int{&opt.MaxWrite, &opt.MaxReadAhead} {
		if *v == 0 {
			*v = MaxWrite
		}
		if *v < minTransfer || *v > MaxWrite {
			return opt, fmt.Errorf("fuse options: transfer size %d must be between %d and %d", *v, minTransfer, MaxWrite)
		}
	}
	if opt.ReadAheadWindow == 0 {
		opt.ReadAheadWindow = ReadAheadWindow
	}
	if opt.ReadAheadWindow > maxReadAheadWindow {
		return opt, fmt.Errorf("fuse options: readahead window %d above %d", opt.ReadAheadWindow, maxReadAheadWindow)
	}
	opt.Batch = opt.Batch.withDefaults()
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return opt, nil
}

// writeBehind reports whether WRITEs are answered before their commit.
func (o *Options) writeBehind() bool {
	return o.SingleWriter && !o.ReadOnly && o.WritebackBytes >= 0
}

// fenced reports whether the mount opens a fencing epoch: a writable
// single-writer mount, the only kind that caches on the strength of being
// the volume's only writer and writes. Multi-writer and read-only mounts
// never fence another mount.
func (o *Options) fenced() bool { return o.SingleWriter && !o.ReadOnly }

// entryTTL is how long the kernel keeps a name.
func (o *Options) entryTTL() time.Duration {
	if o.SingleWriter {
		return singleWriterEntryTTL
	}
	return sharedTTL
}

// attrTTL is how long the kernel keeps attributes and negative entries.
func (o *Options) attrTTL() time.Duration {
	if o.SingleWriter {
		return singleWriterAttrTTL
	}
	return sharedTTL
}
