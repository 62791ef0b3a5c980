package chunkstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func TestOutOfRangeInputIsRefusedBeforeAnyDiskWork(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	cases := map[string]error{
		"write to inode 0":         s.WriteAt(0, []byte("x"), 0),
		"write past the last byte": s.WriteAt(1, []byte("xy"), wire.MaxFileSize-1),
		"write at a huge offset":   s.WriteAt(1, []byte("x"), 1<<63),
		"write too large":          s.WriteAt(1, make([]byte, maxIO+1), 0),
		"read past the last byte":  s.ReadAt(1, make([]byte, 2), wire.MaxFileSize-1),
		"truncate past the limit":  s.Truncate(1, wire.MaxFileSize+1),
		"punch wrapping around":    s.Punch(1, 10, 1<<64-5),
		"remove inode 0":           s.Remove(0),
	}
	for name, err := range cases {
		if err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
	if files := chunkFiles(t, dir); len(files) != 0 {
		t.Fatalf("refused calls wrote chunks: %v", files)
	}
	// The last byte of the largest file is a valid place to write.
	write(t, s, 1, []byte("z"), wire.MaxFileSize-1)
	if got := read(t, s, 1, wire.MaxFileSize-1, 1); got[0] != 'z' {
		t.Fatal("the largest file's last byte does not read back")
	}
}

func TestDecodeManifestRefusesMalformedInput(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	write(t, s, 2, fill(2*testChunk, 1), 0)
	write(t, s, 5, fill(10, 1), 0)
	good := persist(t, s, 1).Encode()
	if _, err := DecodeManifest(bytes.NewReader(good)); err != nil {
		t.Fatalf("a good manifest: %v", err)
	}
	for cut := 0; cut < len(good); cut += 7 {
		if _, err := DecodeManifest(bytes.NewReader(good[:cut])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a manifest cut at %d: %v", cut, err)
		}
	}
	huge := bytes.Clone(good[:36])
	copy(huge[28:36], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if _, err := DecodeManifest(bytes.NewReader(huge)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a manifest claiming 2^64 entries: %v", err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	m := &Manifest{ID: 3, Index: 9, ChunkSize: testChunk, Entries: []Entry{
		{Ino: 2, Index: 0, Version: 1, Len: 5, CRCs: []uint32{1}},
		{Ino: 2, Index: 4, Version: 3, Len: BlockSize + 1, CRCs: []uint32{1, 2}},
	}}
	f.Add(m.Encode())
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := DecodeManifest(bytes.NewReader(raw))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("an error not wrapping ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(m.Encode(), raw[:len(m.Encode())]) {
			t.Fatal("a decoded manifest does not encode to its bytes")
		}
	})
}
