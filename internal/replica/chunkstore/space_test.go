package chunkstore

import "testing"

// A deleted file's chunks and a truncated file's tail stay on disk while a
// kept manifest names them, and Orphaned counts them until two later
// persists have dropped every manifest that did. The old version of a
// rewritten chunk is not counted: the live file still holds that chunk.
func TestOrphanedCountsWhatOnlyKeptManifestsHoldOfDeletedRanges(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	write(t, s, 2, fill(3*testChunk, 1), 0)
	write(t, s, 3, fill(2*testChunk, 2), 0)
	persist(t, s, 10)
	if got := s.Orphaned(); got != 0 {
		t.Fatalf("after a persist of the live files: %d bytes held only by manifests, want 0", got)
	}
	if err := s.Remove(2); err != nil {
		t.Fatal(err)
	}
	write(t, s, 3, fill(testChunk/2, 3), 0)
	if err := s.Truncate(3, testChunk); err != nil {
		t.Fatal(err)
	}
	want := uint64(3*testChunk + testChunk)
	if got := s.Orphaned(); got != want {
		t.Fatalf("after deleting a file of 3 chunks, rewriting a chunk of another and truncating its second: %d held, want %d", got, want)
	}
	persist(t, s, 11)
	if got := s.Orphaned(); got != want {
		t.Fatalf("the older kept manifest still names them: %d held, want %d", got, want)
	}
	persist(t, s, 12)
	if got := s.Orphaned(); got != 0 {
		t.Fatalf("after the second persist: %d held, want 0", got)
	}
}
