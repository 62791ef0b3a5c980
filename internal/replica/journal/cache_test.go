package journal

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func bigEntries(from, to uint64, size int, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)})
	}
	return out
}

// rot flips every data byte of the journal's first segment on disk, so an
// entry read from the file fails its checksum.
func rot(t *testing.T, dir string) {
	t.Helper()
	p := lastSegment(t, dir)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 64; i < len(b); i++ {
		b[i] ^= 0xFF
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The newest entries are served from memory (raft reads each entry back
// once per follower and once to apply it): with the file rotted under it,
// the newest 1 MiB entries still read back intact, while older ones, past
// the byte bound, come from the file and report the rot.
func TestNewestEntriesAreReadFromMemoryWithinTheByteBound(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 1<<30)
	// Twice the bound in 1 MiB entries, in two batches.
	const n = 2 * recentBytes >> 20
	for _, b := range [][]*raft.Log{bigEntries(1, n/2, 1<<20, 1), bigEntries(n/2+1, n, 1<<20, 1)} {
		if err := l.StoreLogs(b); err != nil {
			t.Fatal(err)
		}
	}
	if l.recent.bytes > recentBytes {
		t.Fatalf("cache holds %d bytes, bound %d", l.recent.bytes, recentBytes)
	}
	rot(t, dir)
	var lg raft.Log
	if err := l.GetLog(n, &lg); err != nil || !bytes.Equal(lg.Data, bytes.Repeat([]byte{n}, 1<<20)) {
		t.Fatalf("newest entry not served from memory: %v", err)
	}
	if err := l.GetLog(1, &lg); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("oldest entry, beyond the byte bound, read %v; want the file's corruption", err)
	}
}

// After a suffix is deleted and rewritten in a new term, reads return the
// new entries, never the cached old ones; an idle journal drops its cache.
func TestCacheFollowsDeletesAndEmptiesWhenIdle(t *testing.T) {
	l, _ := openT(t, t.TempDir(), 1<<30)
	if err := l.StoreLogs(bigEntries(1, 5, 1024, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRange(4, 5); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(bigEntries(4, 5, 10, 2)); err != nil {
		t.Fatal(err)
	}
	var lg raft.Log
	for i := uint64(4); i <= 5; i++ {
		if err := l.GetLog(i, &lg); err != nil || lg.Term != 2 || len(lg.Data) != 10 {
			t.Fatalf("entry %d after rewrite: %v term %d, %d bytes; want term 2, 10 bytes", i, err, lg.Term, len(lg.Data))
		}
	}
	l.DropIdle(time.Now())
	if len(l.recent.logs) == 0 {
		t.Fatal("cache dropped right after an append")
	}
	l.DropIdle(time.Now().Add(recentIdle))
	if len(l.recent.logs) != 0 || l.recent.bytes != 0 {
		t.Fatalf("idle journal still caches %d entries", len(l.recent.logs))
	}
	if err := l.GetLog(5, &lg); err != nil || lg.Term != 2 {
		t.Fatalf("entry 5 from the file after the cache emptied: %v term %d", err, lg.Term)
	}
}
