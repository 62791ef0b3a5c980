package journal

import (
	"path/filepath"
	"testing"

	"github.com/cellfleet/cellfleet/internal/durable"
	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
)

// Every entry StoreLogs acknowledged survives a power cut, in segments
// compaction kept as spares and renamed into new ones: a rename the
// directory's fsync does not cover before the first append into the segment
// would leave that append's bytes under the spare's name, and the journal
// would end before them.
func TestRecycledSegmentsKeepAcknowledgedEntriesThroughAPowerCut(t *testing.T) {
	p := powercut.MountT(t)
	dir := filepath.Join(p.Mountpoint(), "journal")
	l, _, err := OpenLog(dir, recycleSeg)
	if err != nil {
		t.Fatal(err)
	}
	// The data directory's entry for the journal is made durable by the
	// worker (OpenCheckpoints syncs the data directory); here by the test.
	if err := durable.SyncDir(p.Mountpoint()); err != nil {
		t.Fatal(err)
	}
	last := fillAndCompact(t, l)
	first, _ := l.FirstIndex()
	if len(l.spares) == 0 {
		t.Fatal("compaction kept no spare: the test wants a segment renamed into a new one")
	}
	// Roll into a spare and append to it; no compaction after (its
	// directory fsync would cover a rename the roll did not sync).
	last = rollAndAppend(t, l, last, 1, 3)
	abandon(l)
	lost := p.CutT(t)

	l2, _, err := OpenLog(dir, recycleSeg)
	if err != nil {
		t.Fatalf("reopening after a power cut (cut dropped %+v): %v", lost, err)
	}
	t.Cleanup(func() { l2.Close() })
	expectSized(t, l2, first, last)
}
