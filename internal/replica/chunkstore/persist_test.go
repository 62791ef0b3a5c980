package chunkstore

import (
	"errors"
	"testing"
)

func TestPersistSyncsOnlyTheChunksMadeSinceThePreviousManifest(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	write(t, s, 2, fill(4*testChunk, 1), 0)
	write(t, s, 3, fill(testChunk, 2), 0)
	first := persist(t, s, 1)
	if st := s.Stats(); st.Synced != 5 || st.Hashed != 5 {
		t.Fatalf("the first persist synced %d and hashed %d chunks, want 5 each", st.Synced, st.Hashed)
	}

	write(t, s, 2, fill(10, 3), testChunk+7) // chunk 1 of file 2: a new version
	write(t, s, 4, fill(testChunk/2, 4), 0)  // a new file
	second := persist(t, s, 2)
	if st := s.Stats(); st.Synced != 7 || st.Hashed != 7 {
		t.Fatalf("the second persist synced %d and hashed %d chunks in all, want 7 (5 + the 2 made since)", st.Synced, st.Hashed)
	}
	if len(second.Entries) != 6 {
		t.Fatalf("the second manifest names %d chunks, want 6", len(second.Entries))
	}
	// The digests of sealed chunks are carried over unchanged.
	if first.Entries[0].SHA256 != second.Entries[0].SHA256 || second.Entries[0].Version != first.Entries[0].Version {
		t.Fatal("an unchanged chunk's entry differs between the manifests")
	}
	persist(t, s, 3)
	if st := s.Stats(); st.Synced != 7 {
		t.Fatalf("a persist with nothing written synced %d chunks", st.Synced-7)
	}
}

func TestPersistRefusesAReleasedOrAlreadyPersistedCapture(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	write(t, s, 2, fill(10, 1), 0)
	c := s.Capture(1)
	if _, err := s.Persist(c); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Persist(c); err == nil || m != nil {
		t.Fatal("a capture was persisted twice")
	}
	c.Release()
	d := s.Capture(2)
	d.Release()
	if _, err := s.Persist(d); err == nil {
		t.Fatal("a released capture was persisted")
	}
	if err := d.ReadAt(2, make([]byte, 1), 0); err == nil {
		t.Fatal("a released capture was read")
	}
}

func TestCollectionRemovesExactlyTheUnreferencedChunks(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{Retain: 1})
	write(t, s, 2, fill(3*testChunk, 1), 0)
	write(t, s, 3, fill(2*testChunk, 2), 0)
	persist(t, s, 1) // 2/0.1 2/1.1 2/2.1 3/0.1 3/1.1

	write(t, s, 2, fill(5, 3), 0)       // 2/0 gets version 2; 2/0.1 is held by manifest 1
	if err := s.Remove(3); err != nil { // held by manifest 1
		t.Fatal(err)
	}
	if err := s.Truncate(2, testChunk); err != nil { // 2/1 and 2/2 held by manifest 1
		t.Fatal(err)
	}
	held := chunkFiles(t, dir)
	if len(held) != 6 {
		t.Fatalf("chunks held by manifest 1 were removed before it was dropped: %v", held)
	}
	persist(t, s, 2) // keeps manifest 3 only (retain 1): only 2/0.2 remains
	want := []string{"2/0.2"}
	if got := chunkFiles(t, dir); names(got) != names(want) {
		t.Fatalf("after the newer manifest was kept the chunk files are %v, want %v", got, want)
	}
	if ids := s.Manifests(); len(ids) != 1 {
		t.Fatalf("kept manifests %v, want one", ids)
	}
}

func TestADroppedManifestsChunksGoUnlessAViewHoldsThem(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{Retain: 2})
	write(t, s, 2, fill(2*testChunk, 1), 0)
	m := persist(t, s, 1)
	if err := s.Remove(2); err != nil {
		t.Fatal(err)
	}
	v, err := s.OpenManifest(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DropManifest(m.ID); err != nil {
		t.Fatal(err)
	}
	if len(chunkFiles(t, dir)) != 2 {
		t.Fatal("a view's chunks were collected while it was open")
	}
	if _, err := v.ReadChunk(2, 1); err != nil {
		t.Fatalf("read through the view of a dropped manifest: %v", err)
	}
	v.Release()
	if err := s.Collect(); err != nil {
		t.Fatal(err)
	}
	if files := chunkFiles(t, dir); len(files) != 0 {
		t.Fatalf("chunks nothing holds were left: %v", files)
	}
	if err := s.Restore(m.ID); err == nil {
		t.Fatal("a dropped manifest was restored")
	}
	if err := s.DropManifest(m.ID); err != nil || errors.Is(err, ErrCollect) {
		t.Fatalf("dropping a manifest twice: %v", err)
	}
}
