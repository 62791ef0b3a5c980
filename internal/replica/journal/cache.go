package journal

import (
	"time"

	"github.com/hashicorp/raft"
)

// The newest entries, kept in memory after they are durable. hashicorp/raft
// reads every entry back from its log store after storing it: the
// coordinator's replicators once per follower, each follower's apply once.
// Without this each read was a pread, a checksum pass and a new buffer of
// the entry's size (four reads of every byte for R=3). raft.NewLogCache
// does the same by count, which with 4 MiB entries could pin 4 MiB per slot
// per worker; this one is bounded by bytes and emptied when the worker is
// idle, so a host's idle workers hold none.
const (
	// recentBytes bounds the entries kept per journal. The mount's
	// write-behind sends entries of up to 4 MiB (wire.MaxData), four in
	// flight, which raft stores as one batch of 16 MiB; the replicators
	// then read every entry of it and, for the next request, the last one
	// again (setPreviousLog). At 8 MiB a batch evicted half of itself
	// before it was sent: the sequential 1 MiB write profile showed the
	// coordinator's GetLog reading entries back from the file (pread, a
	// checksum and a new 4 MiB buffer) for 14 % of its processor time.
	// 24 MiB holds a batch, the entry before it and one more 4 MiB entry
	// for a replicator or apply a request behind.
	recentBytes = 24 << 20
	// recentIdle empties the cache of a journal that took no append for
	// this long (DropIdle).
	recentIdle = time.Second
)

// recentCache holds entries by index in a ring, bounded by recentBytes.
// Guarded by Log.mu: entries enter only when published (after fdatasync),
// so nothing is served from memory that is not durable.
type recentCache struct {
	logs  []*raft.Log // oldest first, contiguous indexes
	bytes int
	last  time.Time // of the last insert
}

func entryBytes(lg *raft.Log) int { return len(lg.Data) + len(lg.Extensions) + 64 }

// add keeps copies of a published batch, dropping the oldest past the bound.
func (c *recentCache) add(logs []*raft.Log, now time.Time) {
	if n := len(c.logs); n > 0 && c.logs[n-1].Index+1 != logs[0].Index {
		c.clear()
	}
	for _, lg := range logs {
		b := entryBytes(lg)
		if b > recentBytes {
			c.clear()
			continue
		}
		cp := *lg
		c.logs = append(c.logs, &cp)
		c.bytes += b
	}
	drop := 0
	for c.bytes > recentBytes {
		c.bytes -= entryBytes(c.logs[drop])
		c.logs[drop] = nil
		drop++
	}
	c.logs = c.logs[drop:]
	c.last = now
}

// get copies the cached entry index into lg.
func (c *recentCache) get(index uint64, lg *raft.Log) bool {
	if len(c.logs) == 0 || index < c.logs[0].Index || index > c.logs[len(c.logs)-1].Index {
		return false
	}
	*lg = *c.logs[index-c.logs[0].Index]
	return true
}

func (c *recentCache) clear() { *c = recentCache{} }

// DropIdle empties the cache of recent entries when no append came for
// recentIdle; the worker calls it from its periodic journal check.
func (l *Log) DropIdle(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent.logs) > 0 && now.Sub(l.recent.last) >= recentIdle {
		l.recent.clear()
	}
}
