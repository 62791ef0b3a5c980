package chunkstore

import (
	"bytes"
	"errors"
	"testing"
)

// transfer plays the rebuild exchange from a coordinator's kept manifest
// to a follower and returns how many chunks were sent.
func transfer(t *testing.T, from, to *Store, id uint64) int {
	t.Helper()
	v, err := from.OpenManifest(id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	m, err := DecodeManifest(bytes.NewReader(v.Manifest().Encode()))
	if err != nil {
		t.Fatalf("decode the sent manifest: %v", err)
	}
	missing := to.Missing(m)
	for _, e := range missing {
		data, err := v.ReadChunk(e.Ino, e.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := to.Install(m, e, data); err != nil {
			t.Fatalf("install: %v", err)
		}
	}
	if _, err := to.Adopt(m); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	return len(missing)
}

func TestARebuildSendsOnlyTheChunksTheFollowerLacks(t *testing.T) {
	leader := open(t, t.TempDir(), Options{})
	follower := open(t, t.TempDir(), Options{})
	data := fill(8*testChunk, 1)
	write(t, leader, 2, data, 0)
	m := persist(t, leader, 10)
	if n := transfer(t, leader, follower, m.ID); n != 8 {
		t.Fatalf("an empty follower was sent %d chunks, want 8", n)
	}
	if !bytes.Equal(read(t, follower, 2, 0, uint64(len(data))), data) {
		t.Fatal("the rebuilt follower's file differs")
	}

	// The follower was away while two chunks were rewritten.
	write(t, leader, 2, fill(testChunk, 2), 3*testChunk)
	write(t, leader, 2, fill(7, 3), 6*testChunk+9)
	copy(data[3*testChunk:], fill(testChunk, 2))
	copy(data[6*testChunk+9:], fill(7, 3))
	m = persist(t, leader, 20)
	if n := transfer(t, leader, follower, m.ID); n != 2 {
		t.Fatalf("a follower missing two chunks was sent %d", n)
	}
	if !bytes.Equal(read(t, follower, 2, 0, uint64(len(data))), data) {
		t.Fatal("the caught-up follower's file differs")
	}
	// What the follower adopted survives its restart.
	follower.Close()
	follower = open(t, follower.dir, Options{})
	if !bytes.Equal(read(t, follower, 2, 0, uint64(len(data))), data) {
		t.Fatal("the adopted manifest was not restored at open")
	}
}

func TestInstallRefusesAChunkWhoseDigestDiffers(t *testing.T) {
	leader := open(t, t.TempDir(), Options{})
	follower := open(t, t.TempDir(), Options{})
	write(t, leader, 2, fill(testChunk, 1), 0)
	m := persist(t, leader, 1)
	e := m.Entries[0]
	bad := fill(testChunk, 1)
	bad[100] ^= 1
	if err := follower.Install(m, e, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("install of a damaged chunk: %v, want ErrCorrupt", err)
	}
	if err := follower.Install(m, e, bad[:10]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("install of a short chunk: %v, want ErrCorrupt", err)
	}
	if files := chunkFiles(t, follower.dir); len(files) != 0 {
		t.Fatalf("a refused chunk was written: %v", files)
	}
	if _, err := follower.Adopt(m); err == nil {
		t.Fatal("a manifest whose chunk was refused was adopted")
	}
}

func TestAdoptReplacesWhatTheFollowerWroteOnItsOwn(t *testing.T) {
	leader := open(t, t.TempDir(), Options{})
	follower := open(t, t.TempDir(), Options{})
	data := fill(3*testChunk, 1)
	write(t, leader, 2, data, 0)
	m := persist(t, leader, 10)
	write(t, follower, 2, fill(3*testChunk, 9), 0) // an unpersisted tail the group never committed
	write(t, follower, 5, fill(10, 9), 0)
	if n := transfer(t, leader, follower, m.ID); n != 3 {
		t.Fatalf("a follower whose chunks have no checksums was sent %d chunks, want 3", n)
	}
	if !bytes.Equal(read(t, follower, 2, 0, uint64(len(data))), data) {
		t.Fatal("the adopted manifest did not replace the follower's own writes")
	}
	if !bytes.Equal(read(t, follower, 5, 0, 10), make([]byte, 10)) {
		t.Fatal("a file the manifest does not name kept the follower's data")
	}
	if got, want := chunkFiles(t, follower.dir), referenced(follower); names(got) != names(want) {
		t.Fatalf("the follower's own chunks were not collected: %v, want %v", got, want)
	}
}
