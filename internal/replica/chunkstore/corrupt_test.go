package chunkstore

import (
	"bytes"
	"errors"
	"testing"
)

// sealedChunkPath persists file 4 (three chunks) and returns the store and
// the path of its chunk 1.
func sealedChunkPath(t *testing.T) (*Store, string, []byte) {
	s := open(t, t.TempDir(), Options{})
	data := fill(3*testChunk, 1)
	write(t, s, 4, data, 0)
	persist(t, s, 1)
	s.mu.RLock()
	path := s.chunkPath(chunkKey{4, 1, s.files[4].get(1).ver})
	s.mu.RUnlock()
	return s, path, data
}

func TestACorruptedChunkByteIsReportedAsCorruptAndNeverServed(t *testing.T) {
	s, path, data := sealedChunkPath(t)
	flipByte(t, path, BlockSize+123) // block 1 of chunk 1

	p := make([]byte, 4096)
	err := s.ReadAt(4, p, testChunk+BlockSize+100)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a read of the damaged block: %v, want ErrCorrupt", err)
	}
	if !bytes.Equal(p, make([]byte, len(p))) {
		t.Fatal("a read that failed its check left bytes in the buffer")
	}
	// Other blocks of the same chunk, and other chunks, still read.
	if !bytes.Equal(read(t, s, 4, testChunk, 4096), data[testChunk:testChunk+4096]) {
		t.Fatal("an undamaged block of the damaged chunk does not read")
	}
	if !bytes.Equal(read(t, s, 4, 0, testChunk), data[:testChunk]) {
		t.Fatal("an undamaged chunk does not read")
	}
	whole := make([]byte, 3*testChunk) // block-aligned: read in place
	if err := s.ReadAt(4, whole, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a read spanning the damaged block: %v, want ErrCorrupt", err)
	}
	if !bytes.Equal(whole, make([]byte, len(whole))) {
		t.Fatal("a read that failed its check left the damaged bytes in the buffer")
	}
}

func TestACorruptedChunkIsNotCarriedIntoItsNextVersion(t *testing.T) {
	s, path, _ := sealedChunkPath(t)
	flipByte(t, path, 7)
	err := s.WriteAt(4, []byte("x"), testChunk+2*BlockSize)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("copy-on-write of a damaged chunk: %v, want ErrCorrupt", err)
	}
}

func TestAViewRefusesToSendACorruptedChunk(t *testing.T) {
	s, path, _ := sealedChunkPath(t)
	flipByte(t, path, 3*BlockSize+1)
	v, err := s.OpenManifest(s.Manifests()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if _, err := v.ReadChunk(4, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a damaged chunk for a transfer: %v, want ErrCorrupt", err)
	}
	if err := s.Verify(s.Manifests()[0]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verify of a manifest naming a damaged chunk: %v, want ErrCorrupt", err)
	}
}
