package journal

import (
	"testing"
)

// After installing a checkpoint raft removes every entry (the journal is a
// MonotonicLogStore) and appends after the checkpoint's index. Entries a
// compaction only hid below the floor must go too, or they reappear after a
// restart in front of the new ones. Every reopen below is a kill -9 point.
func TestRemovingEveryEntryLetsTheNextAppendStartPastACheckpoint(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 256)
	for i := uint64(1); i <= 60; i += 10 {
		if err := l.StoreLogs(entries(i, i+9)); err != nil {
			t.Fatal(err)
		}
	}
	// Compaction of a prefix that shares a segment with live entries: they
	// are hidden, not deleted.
	if err := l.DeleteRange(1, 55); err != nil {
		t.Fatal(err)
	}
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	// raft's removeOldLogs after an installed checkpoint at index 500.
	if err := l.DeleteRange(first, last); err != nil {
		t.Fatal(err)
	}
	expectEmpty(t, l)
	l.Close()

	l, _ = openT(t, dir, 256)
	expectEmpty(t, l) // no hidden entry came back
	if err := l.StoreLogs(entries(501, 520)); err != nil {
		t.Fatalf("the first append after the checkpoint: %v", err)
	}
	l.Close()
	l, _ = openT(t, dir, 256)
	expectRange(t, l, 501, 520)
	if err := l.StoreLogs(entries(521, 521)); err != nil {
		t.Fatal(err)
	}
}

// A crash part way through removing everything leaves a prefix of the old
// journal; Reset (what the worker runs when the newest checkpoint is past
// the journal's end) finishes it.
func TestResetRemovesAnOldTailLeftBehindACheckpoint(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 256)
	if err := l.StoreLogs(entries(1, 40)); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	expectEmpty(t, l)
	if err := l.StoreLogs(entries(100, 110)); err != nil {
		t.Fatalf("append after reset: %v", err)
	}
	l.Close()
	l, _ = openT(t, dir, 256)
	expectRange(t, l, 100, 110)
}

func TestJournalIsAMonotonicLogStore(t *testing.T) {
	l, _ := openT(t, t.TempDir(), 256)
	if !l.IsMonotonic() {
		t.Fatal("the journal refuses gaps, so raft must treat it as monotonic")
	}
}

func expectEmpty(t *testing.T, l *Log) {
	t.Helper()
	f, _ := l.FirstIndex()
	la, _ := l.LastIndex()
	if f != 0 || la != 0 {
		t.Fatalf("journal holds [%d, %d], want it empty", f, la)
	}
}
